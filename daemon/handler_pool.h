// The thread pool that runs the public listener's handlers off MHD's event loop.
#ifndef RACKGATE_DAEMON_HANDLER_POOL_H_
#define RACKGATE_DAEMON_HANDLER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rackgate::daemon {

// The handler threads (HttpServerOptions::handler_threads). Post() is safe
// from any thread; Stop() (also run by the destructor) runs every task
// already posted, then joins. Tasks posted after Stop() are dropped.
class HandlerPool {
 public:
  // Starts n threads.
  explicit HandlerPool(unsigned n);
  ~HandlerPool();
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  void Post(std::function<void()> task);
  void Stop();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                     // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_HANDLER_POOL_H_
