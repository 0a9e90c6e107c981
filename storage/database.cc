// Group commit on the writer connection, and the pool of read connections.
#include "storage/database.h"

#include <algorithm>

namespace rackgate::storage {

namespace {

constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{5000};

}  // namespace

Database::Database(const StoreOptions& options, Opener open, std::unique_ptr<Connection> writer)
    : options_(options), open_(std::move(open)), writer_(std::move(writer)) {
  writer_->CountRoundTripsIn(&round_trips_);
  idle_readers_.reserve(static_cast<size_t>(std::max(0, options_.max_idle_readers.value_or(options_.max_readers))));
}

RoundTrips Database::GetRoundTrips() const {
  return {round_trips_.statements.load(std::memory_order_relaxed),
          round_trips_.transactions.load(std::memory_order_relaxed)};
}

std::pair<uint64_t, uint64_t> Database::CommitsAndWrites() const {
  std::lock_guard<std::mutex> lock(queue_mu_);
  return {commits_, grouped_writes_};
}

std::unique_ptr<Connection> Database::AcquireReader() {
  std::vector<IdleReader> stale;  // closed outside the lock
  {
    std::unique_lock<std::mutex> lock(readers_mu_);
    const auto idle_since = std::chrono::steady_clock::now() - std::chrono::milliseconds(options_.reader_idle_ms);
    auto fresh = std::find_if(idle_readers_.begin(), idle_readers_.end(),
                              [&](const IdleReader& r) { return r.since >= idle_since; });
    if (fresh != idle_readers_.begin()) {
      stale.assign(std::make_move_iterator(idle_readers_.begin()), std::make_move_iterator(fresh));
      idle_readers_.erase(idle_readers_.begin(), fresh);
    }
    const int limit = std::max(1, options_.max_readers);
    if (!readers_cv_.wait_for(lock, std::chrono::milliseconds(std::max(0, options_.busy_timeout_ms)),
                              [&] { return leased_readers_ < limit; })) {
      Fail(Status::IoError("db_busy", "every read connection stayed in use for busy_timeout"));
    }
    ++leased_readers_;
    if (!idle_readers_.empty()) {
      auto conn = std::move(idle_readers_.back().conn);
      idle_readers_.pop_back();
      return conn;
    }
  }
  auto conn = open_(/*read_only=*/true);
  if (!conn.ok()) {
    std::lock_guard<std::mutex> lock(readers_mu_);
    --leased_readers_;
    readers_cv_.notify_one();
    Fail(conn.status());
  }
  (*conn)->CountRoundTripsIn(&round_trips_);
  return std::move(conn).value();
}

void Database::ReleaseReader(std::unique_ptr<Connection> conn) noexcept {
  std::lock_guard<std::mutex> lock(readers_mu_);
  --leased_readers_;
  readers_cv_.notify_one();
  if (!conn || conn->InTransaction() || conn->Broken()) return;
  if (idle_readers_.size() < idle_readers_.capacity()) {
    idle_readers_.push_back({std::move(conn), std::chrono::steady_clock::now()});
  }
}

void Database::DropIdleReaders() noexcept {
  // clear() keeps the capacity that ReleaseReader relies on.
  std::lock_guard<std::mutex> lock(readers_mu_);
  idle_readers_.clear();
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

Connection& Database::Writer() {
  if (writer_ && !writer_->Broken()) return *writer_;
  writer_.reset();
  const auto now = std::chrono::steady_clock::now();
  if (writer_error_ && now < writer_retry_at_) Fail(*writer_error_);
  auto conn = open_(/*read_only=*/false);
  if (!conn.ok()) {
    writer_backoff_ = std::clamp(writer_backoff_ * 2, kFirstBackoff, kMaxBackoff);
    writer_retry_at_ = now + writer_backoff_;
    writer_error_ = conn.status();
    Fail(conn.status());
  }
  writer_ = std::move(conn).value();
  writer_->CountRoundTripsIn(&round_trips_);
  writer_backoff_ = std::chrono::milliseconds(0);
  writer_error_.reset();
  return *writer_;
}

bool Database::RunWhole(Connection& c, const std::vector<Pending*>& group) {
  Transaction txn(&c, Transaction::Kind::kWrite);
  for (Pending* p : group) {
    try {
      p->run(c);
    } catch (...) {
      return false;  // txn's destructor rolls the attempt back
    }
  }
  txn.Commit();
  return true;
}

void Database::RunGroup(const std::vector<Pending*>& group) noexcept {
  try {
    Connection& c = Writer();
    if (group.size() > 1 && std::all_of(group.begin(), group.end(), [](const Pending* p) { return p->rerunnable; })) {
      if (RunWhole(c, group)) return;
      // One write failed and nothing stands: the group runs again below, a
      // savepoint per write, where the failing write fails alone and the
      // others commit.
    }
    Transaction txn(&c, Transaction::Kind::kWrite);
    if (group.size() == 1) {
      // A group of one needs no savepoint (two round trips fewer): when the
      // write fails, the transaction, which holds nothing else, is rolled
      // back whole by txn's destructor, and nothing is committed.
      Pending* p = group.front();
      try {
        p->run(c);
      } catch (...) {
        p->error = std::current_exception();
        return;
      }
      txn.Commit();
      return;
    }
    for (Pending* p : group) {
      c.Run("SAVEPOINT w");
      try {
        p->run(c);
        c.Run("RELEASE w");
      } catch (...) {
        p->error = std::current_exception();
        // Some errors (SQLite's FULL or IOERR, a lost server) end the whole
        // transaction: then nothing of the group stands.
        if (!c.InTransaction() || c.Broken()) throw;
        c.Run("ROLLBACK TO w");
        c.Run("RELEASE w");
        c.audit_head().reset();  // the rolled-back write may have moved it
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
