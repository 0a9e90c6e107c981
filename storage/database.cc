// Group commit on the writer connection, and the pool of read connections.
#include "storage/database.h"

#include <algorithm>

namespace rackgate::storage {

Database::Database(std::string path, const StoreOptions& options, std::unique_ptr<Connection> writer)
    : path_(std::move(path)), options_(options), writer_(std::move(writer)) {
  idle_readers_.reserve(static_cast<size_t>(std::max(0, options_.max_idle_readers)));
}

std::pair<uint64_t, uint64_t> Database::CommitsAndWrites() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return {commits_, grouped_writes_};
}

std::unique_ptr<Connection> Database::AcquireReader() {
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    if (!idle_readers_.empty()) {
      auto conn = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return conn;
    }
  }
  auto conn = Connection::Open(path_, options_.busy_timeout_ms, /*read_only=*/true);
  if (!conn.ok()) Fail(conn.status());
  return std::move(conn).value();
}

void Database::ReleaseReader(std::unique_ptr<Connection> conn) noexcept {
  if (!conn || sqlite3_get_autocommit(conn->db()) == 0) return;
  std::lock_guard<std::mutex> lock(readers_mu_);
  if (idle_readers_.size() < idle_readers_.capacity()) idle_readers_.push_back(std::move(conn));
}

void Database::Submit(Pending* p) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  queue_.push_back(p);
  while (!p->done) {
    if (committing_) {
      queue_cv_.wait(lock);
      continue;
    }
    committing_ = true;
    std::vector<Pending*> group;
    while (!queue_.empty() && group.size() < kMaxGroup) {
      group.push_back(queue_.front());
      queue_.pop_front();
    }
    lock.unlock();
    RunGroup(group);
    lock.lock();
    for (Pending* g : group) g->done = true;
    committing_ = false;
    ++commits_;
    grouped_writes_ += group.size();
    queue_cv_.notify_all();
  }
  lock.unlock();
  if (p->error) std::rethrow_exception(p->error);
}

void Database::RunGroup(const std::vector<Pending*>& group) noexcept {
  Connection& c = *writer_;
  try {
    Transaction txn(&c, Transaction::Kind::kWrite);
    for (Pending* p : group) {
      c.Run("SAVEPOINT w");
      try {
        p->run(c);
        c.Run("RELEASE w");
      } catch (...) {
        p->error = std::current_exception();
        // Some errors (SQLITE_FULL, IOERR, ...) roll back the whole
        // transaction: then nothing of the group stands.
        if (sqlite3_get_autocommit(c.db()) != 0) throw;
        c.Run("ROLLBACK TO w");
        c.Run("RELEASE w");
      }
    }
    txn.Commit();
  } catch (...) {
    const std::exception_ptr batch_error = std::current_exception();
    for (Pending* p : group) {
      if (!p->error) p->error = batch_error;
    }
  }
}

}  // namespace rackgate::storage
