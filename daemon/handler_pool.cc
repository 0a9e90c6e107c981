// The handler threads: a queue of tasks and the threads that drain it.
#include "daemon/handler_pool.h"

#include <utility>

namespace rackgate::daemon {

HandlerPool::HandlerPool(unsigned n) {
  threads_.reserve(n);
  for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
}

HandlerPool::~HandlerPool() { Stop(); }

void HandlerPool::Post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void HandlerPool::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void HandlerPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace rackgate::daemon
