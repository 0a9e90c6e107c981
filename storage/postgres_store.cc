// The PostgreSQL store's life: connecting, migrating, and hearing the
// changes that other appliances make (docs/storage.md, "PostgreSQL").
#include "storage/postgres.h"
#include "storage/schema_postgres.h"
#include "storage/sql_store.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace rackgate::storage {

namespace {

constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{5000};
// How often the listener thread looks at its stop flag.
constexpr int kPollMs = 200;

}  // namespace

// What the store and its listener thread share.
struct PostgresStore::Shared {
  // The server process of this store's writer connection: its own
  // notifications are not another appliance's changes.
  std::atomic<int> writer_pid{0};

  std::mutex mu;
  std::condition_variable cv;
  ChangeListener listener;  // guarded by mu
  bool stop = false;        // guarded by mu

  // Called with mu held, so that once SetChangeListener returns the old
  // listener is never called again.
  void Notify(std::string_view topic) {
    if (listener) listener(topic);
  }
};

PostgresStore::PostgresStore(std::string url, std::shared_ptr<Shared> shared, std::unique_ptr<Database> db)
    : SqlStore(std::move(db)), url_(std::move(url)), shared_(std::move(shared)) {}

PostgresStore::~PostgresStore() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stop = true;
  }
  shared_->cv.notify_all();
  if (listener_thread_.joinable()) listener_thread_.join();
}

Result<std::unique_ptr<Store>> PostgresStore::Open(const std::string& url, const StoreOptions& options) {
  auto shared = std::make_shared<Shared>();
  auto writer = PgConnection::Open(url, options, /*read_only=*/false);
  if (!writer.ok()) return writer.status();
  // MigratePostgres takes its own advisory lock per step: of several
  // appliances starting at once, one migrates, the others find it done.
  if (Status s = MigratePostgres(writer->get()); !s.ok()) return s;
  shared->writer_pid = PQbackendPID((*writer)->conn());
  Database::Opener open = [url, options, shared](bool read_only) -> Result<std::unique_ptr<Connection>> {
    auto conn = PgConnection::Open(url, options, read_only);
    if (!conn.ok()) return conn.status();
    if (!read_only) shared->writer_pid = PQbackendPID((*conn)->conn());
    return std::unique_ptr<Connection>(std::move(conn).value());
  };
  auto db = std::make_unique<Database>(options, std::move(open),
                                       std::unique_ptr<Connection>(std::move(writer).value()));
  return std::unique_ptr<Store>(new PostgresStore(url, std::move(shared), std::move(db)));
}

Status PostgresStore::Backup(const std::string& dest_path) {
  (void)dest_path;
  return Status::Unsupported("backup_unsupported",
                             "rackgated backs up only an SQLite database: back up PostgreSQL with pg_basebackup "
                             "(with WAL archiving) or pg_dump (docs/ha.md)");
}

void PostgresStore::SetChangeListener(ChangeListener listener) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->listener = std::move(listener);
  if (shared_->listener && !listener_thread_.joinable() && !shared_->stop) {
    listener_thread_ = std::thread([this] { Listen(); });
  }
}

void PostgresStore::Listen() {
  std::chrono::milliseconds backoff{0};
  std::unique_lock<std::mutex> lock(shared_->mu);
  while (!shared_->stop) {
    lock.unlock();
    PgConnPtr conn;
    if (auto pg = PgConnect(url_); pg.ok()) {
      conn = std::move(pg).value();
      PgResultPtr res(PQexec(conn.get(), "LISTEN rackgate_changes"));
      if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) conn.reset();
    }
    lock.lock();
    if (conn == nullptr) {
      backoff = std::clamp(backoff * 2, kFirstBackoff, kMaxBackoff);
      shared_->cv.wait_for(lock, backoff, [&] { return shared_->stop; });
      continue;
    }
    backoff = std::chrono::milliseconds(0);
    // Whatever changed while nobody listened was not announced.
    shared_->Notify("*");
    while (!shared_->stop) {
      lock.unlock();
      pollfd pfd{PQsocket(conn.get()), POLLIN, 0};
      const int rc = pfd.fd < 0 ? -1 : ::poll(&pfd, 1, kPollMs);
      const bool lost = (rc < 0 && errno != EINTR) || (rc > 0 && PQconsumeInput(conn.get()) == 0) ||
                        PQstatus(conn.get()) == CONNECTION_BAD;
      lock.lock();
      while (PGnotify* n = PQnotifies(conn.get())) {
        if (n->be_pid != shared_->writer_pid.load()) shared_->Notify(n->extra != nullptr ? n->extra : "*");
        PQfreemem(n);
      }
      if (lost) break;
    }
  }
}

}  // namespace rackgate::storage
