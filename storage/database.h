// One database as the store uses it: a writer connection whose writes are
// committed in groups, and a bounded pool of read connections. The same for
// every backend (storage/sql.h); the backend gives the connections.
#ifndef RACKGATE_STORAGE_DATABASE_H_
#define RACKGATE_STORAGE_DATABASE_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/database.h is internal to storage/; include storage/store.h"
#endif

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "storage/sql.h"
#include "storage/types.h"

namespace rackgate::storage {

// Thread-safe. Failures are thrown as StoreError (storage/sql.h).
class Database {
 public:
  // Opens a new connection to the same database: read-only (a reader) or
  // not (the writer, again, after it broke).
  using Opener = std::function<Result<std::unique_ptr<Connection>>(bool read_only)>;

  // Takes ownership of `writer`, an open, migrated read-write connection.
  Database(const StoreOptions& options, Opener open, std::unique_ptr<Connection> writer);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs f(Connection&) on the writer connection, inside a savepoint of a
  // write transaction, and returns once that transaction is durable. Writes
  // are serialized, and committed in groups: whoever finds no commit under
  // way runs every write queued so far (at most kMaxGroup) in one
  // transaction, each in its own savepoint, and commits them together; the
  // others wait for their group's commit. An exception from f (a StoreError,
  // say) rolls back f's savepoint only and is rethrown to f's caller; a
  // failed commit, or an error after which the database has rolled back the
  // whole transaction, is rethrown to every write of the group. Nobody is
  // told a write succeeded before its commit did.
  //
  // A writer connection that broke (Connection::Broken: the server went
  // away) is replaced before the next group; while that fails, writes fail
  // with the opener's status (db_unavailable), at most one attempt per
  // backoff interval (100 ms doubling to 5 s), so a dead server is not
  // hammered.
  template <typename F>
  auto Write(F&& f) -> decltype(f(std::declval<Connection&>())) {
    return WriteImpl(std::forward<F>(f), /*rerunnable=*/false);
  }

  // Write, for an f that may run more than once: it changes nothing but
  // through the connection and its result (a run rolled back and run again
  // leaves what one run leaves). A group whose writes are all rerunnable
  // runs them without a savepoint each (two statements fewer per write);
  // when one of them fails, the whole attempt is rolled back and the group
  // runs again as Write runs it, a savepoint per write, so the failing
  // write fails alone. The protocol's writes per machine are written so
  // (docs/performance.md, "Round trips per joined machine").
  template <typename F>
  auto WriteRerunnable(F&& f) -> decltype(f(std::declval<Connection&>())) {
    return WriteImpl(std::forward<F>(f), /*rerunnable=*/true);
  }

  // Runs f(Connection&) in a read transaction (one snapshot) on a pooled
  // read-only connection. A read that fails because its connection broke
  // (Connection::Broken: the server went away, a failover) is run once
  // more on a fresh connection, after the idle ones are dropped (they went
  // to the same server): a read changes nothing, so running it twice is
  // safe. A write is never retried (it may have committed).
  template <typename F>
  auto Read(F&& f) -> decltype(f(std::declval<Connection&>())) {
    return ReadImpl(std::forward<F>(f), /*in_transaction=*/true);
  }

  // Runs f(Connection&), which runs exactly ONE statement, on a pooled
  // read-only connection without BEGIN and COMMIT: a single statement reads
  // one snapshot by itself, in the transaction the database makes for it
  // (counted as one). Two round trips fewer than Read on PostgreSQL. Retried
  // once on a broken connection, as Read.
  template <typename F>
  auto ReadOne(F&& f) -> decltype(f(std::declval<Connection&>())) {
    return ReadImpl(std::forward<F>(f), /*in_transaction=*/false);
  }

  // Write transactions committed since construction, and the writes they
  // carried.
  std::pair<uint64_t, uint64_t> CommitsAndWrites() const;
  // Statements and transactions run since construction, on every connection
  // (RoundTripCounts).
  RoundTrips GetRoundTrips() const;

  const StoreOptions& options() const { return options_; }

 private:
  class Lease {
   public:
    explicit Lease(Database* db) : db_(db), conn_(db->AcquireReader()) {}
    ~Lease() { db_->ReleaseReader(std::move(conn_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Connection* conn() const { return conn_.get(); }

   private:
    Database* db_;
    std::unique_ptr<Connection> conn_;
  };

  std::unique_ptr<Connection> AcquireReader();
  // Never throws: the vector's capacity was reserved, and a connection left
  // inside a transaction, or broken, is closed rather than pooled.
  void ReleaseReader(std::unique_ptr<Connection> conn) noexcept;
  // Closes every idle read connection.
  void DropIdleReaders() noexcept;

  static constexpr size_t kMaxGroup = 64;

  struct Pending {
    Pending(std::function<void(Connection&)> r, bool rerun) : run(std::move(r)), rerunnable(rerun) {}
    std::function<void(Connection&)> run;
    bool rerunnable;
    std::exception_ptr error;
    bool done = false;  // guarded by queue_mu_
  };

  // Read and ReadOne: f on a leased reader, in a read transaction or as one
  // statement (counted as the transaction the database makes for it); run
  // once more on a fresh connection when the first one broke.
  template <typename F>
  auto ReadImpl(F&& f, bool in_transaction) -> decltype(f(std::declval<Connection&>())) {
    for (int attempt = 0;; ++attempt) {
      Lease lease(this);
      try {
        if (!in_transaction) {
          if (RoundTripCounts* c = lease.conn()->round_trip_counts()) {
            c->transactions.fetch_add(1, std::memory_order_relaxed);
          }
          return f(*lease.conn());
        }
        Transaction txn(lease.conn(), Transaction::Kind::kRead);
        auto result = f(*lease.conn());
        txn.Commit();
        return result;
      } catch (const StoreError&) {
        if (attempt > 0 || !lease.conn()->Broken()) throw;
      }
      DropIdleReaders();
    }
  }

  template <typename F>
  auto WriteImpl(F&& f, bool rerunnable) -> decltype(f(std::declval<Connection&>())) {
    using R = decltype(f(std::declval<Connection&>()));
    if constexpr (std::is_void_v<R>) {
      Pending p([&](Connection& c) { f(c); }, rerunnable);
      Submit(&p);
    } else {
      std::optional<R> result;
      Pending p([&](Connection& c) { result.emplace(f(c)); }, rerunnable);
      Submit(&p);
      return std::move(*result);
    }
  }

  // Queues p and returns once its group has committed (or failed); rethrows
  // p's error.
  void Submit(Pending* p);
  // Runs a group on the writer connection: one transaction, a savepoint per
  // write (none for a group of one, nor for a group of rerunnable writes
  // until one fails). Only the thread that set committing_ gets here.
  void RunGroup(const std::vector<Pending*>& group) noexcept;
  // Every write of the group in one transaction without savepoints; false,
  // with nothing committed, when one of them failed. Throws what the
  // transaction's begin or commit throws.
  static bool RunWhole(Connection& c, const std::vector<Pending*>& group);
  // A usable writer, or throws (db_unavailable while the backoff lasts).
  // Only the thread that set committing_ calls it.
  Connection& Writer();

  const StoreOptions options_;
  const Opener open_;
  // Used only by the thread that set committing_.
  std::unique_ptr<Connection> writer_;
  std::chrono::steady_clock::time_point writer_retry_at_{};
  std::chrono::milliseconds writer_backoff_{0};
  std::optional<Status> writer_error_;

  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending*> queue_;   // guarded by queue_mu_
  bool committing_ = false;      // guarded by queue_mu_
  RoundTripCounts round_trips_;
  uint64_t commits_ = 0;         // guarded by queue_mu_
  uint64_t grouped_writes_ = 0;  // guarded by queue_mu_

  std::mutex readers_mu_;
  std::condition_variable readers_cv_;
  struct IdleReader {
    std::unique_ptr<Connection> conn;
    std::chrono::steady_clock::time_point since;
  };
  // Oldest released first; reads take the newest (kept warm), and those idle
  // for reader_idle_ms are closed from the front. Capacity reserved to
  // max_idle_readers so that ReleaseReader never allocates.
  std::vector<IdleReader> idle_readers_;  // guarded by readers_mu_
  int leased_readers_ = 0;                // guarded by readers_mu_
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_DATABASE_H_
