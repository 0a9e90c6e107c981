// Webhook events: the configured webhooks, the deliveries' state, listing and
// retention. The events themselves are written by the schema's triggers
// (schema.cc, kV4Events), in the transaction of the change they report.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// Columns 0..11 of an event, read by ReadEvent.
#define RACKGATE_EVENT_COLUMNS                                                                             \
  "e.id, e.at, e.type, e.machine_id, e.hostname, e.pool, e.actor, e.why, e.detail_json, e.attestation_id, " \
  "e.reason, e.reasons_json"
constexpr int kEventColumnCount = 12;
constexpr char kEventColumns[] = "SELECT " RACKGATE_EVENT_COLUMNS " FROM events e ";

Event ReadEvent(const Stmt& s) {
  Event e;
  e.id = s.Int(0);
  e.at = s.Int(1);
  e.type = s.Text(2);
  e.machine_id = s.OptInt(3);
  e.hostname = s.Text(4);
  e.pool = s.Text(5);
  e.actor = s.Text(6);
  e.why = s.Text(7);
  e.detail_json = s.Text(8);
  // A refused attestation's detail is made here, from the columns its
  // trigger copied (schema.cc says why not in SQL).
  if (std::optional<int64_t> attestation_id = s.OptInt(9)) {
    e.detail_json =
        Dump(json{{"attestation_id", *attestation_id}, {"reason", s.Text(10)}, {"reasons", StringList(s.Text(11))}});
  }
  return e;
}

// Columns 0..4 of `s` from `first`: webhook, attempts, next_attempt_at,
// delivered_at, last_error.
EventDelivery ReadDelivery(const Stmt& s, int first) {
  EventDelivery d;
  d.webhook = s.Text(first);
  d.attempts = s.Int(first + 1);
  d.next_attempt_at = s.Int(first + 2);
  d.delivered_at = s.OptInt(first + 3);
  d.last_error = s.Text(first + 4);
  return d;
}

// A last_error is for the operator's eyes: bounded, and cut on a UTF-8
// boundary so the JSON that shows it stays valid.
std::string BoundedError(const std::string& error) {
  constexpr size_t kMax = 512;
  if (error.size() <= kMax) return error;
  size_t n = kMax;
  while (n > 0 && (static_cast<unsigned char>(error[n]) & 0xC0) == 0x80) --n;
  return error.substr(0, n);
}

}  // namespace

Result<int64_t> SqlStore::SyncWebhooks(const std::vector<WebhookTarget>& hooks, int64_t now) {
  return Guard([&]() -> Result<int64_t> {
    std::set<std::string> urls;
    for (const WebhookTarget& h : hooks) {
      CheckSize("webhook url", h.url.size(), 1, 2048);
      if (!urls.insert(h.url).second) {
        return Status::InvalidArgument("field_invalid", "webhook URL listed twice: " + h.url);
      }
      for (const std::string& t : h.events) {
        CheckSize("webhook event type", t.size(), 1, 64);
        if (t.find(',') != std::string::npos) {
          return Status::InvalidArgument("field_invalid", "an event type has no comma: " + t);
        }
      }
    }
    return db_->Write([&](Connection& c) -> int64_t {
      int64_t dropped = 0;
      std::vector<std::string> stale;
      {
        Stmt s = c.Prepare("SELECT url FROM webhooks");
        while (s.Step()) {
          if (!urls.count(s.Text(0))) stale.push_back(s.Text(0));
        }
      }
      for (const std::string& url : stale) {
        Stmt count = c.Prepare("SELECT count(*) FROM event_deliveries WHERE webhook = ?1 AND delivered_at IS NULL");
        count.BindText(1, url);
        if (count.Step()) dropped += count.Int(0);
        Stmt del = c.Prepare("DELETE FROM webhooks WHERE url = ?1");
        del.BindText(1, url).Run();
      }
      for (const WebhookTarget& h : hooks) {
        Stmt s = c.Prepare(
            "INSERT INTO webhooks (url, types, added_at) VALUES (?1, ?2, ?3) "
            "ON CONFLICT (url) DO UPDATE SET types = excluded.types");
        std::string types;  // ",t1,t2,", or "" for every type
        for (const std::string& t : h.events) types += "," + t;
        if (!types.empty()) types += ",";
        s.BindText(1, h.url).BindText(2, types).BindInt(3, now).Run();
      }
      return dropped;
    });
  });
}

namespace {

// Undelivered deliveries due at `now`, soonest first, with their events:
// the event's columns (as kEventColumns) and the delivery's, from the join.
std::vector<DueDelivery> SelectDue(Connection& c, int64_t now, int limit) {
  Stmt q = c.Prepare(
      "SELECT " RACKGATE_EVENT_COLUMNS ", d.webhook, d.attempts, d.next_attempt_at, d.delivered_at, d.last_error "
      "FROM event_deliveries d JOIN events e ON e.id = d.event_id "
      "WHERE d.delivered_at IS NULL AND d.next_attempt_at <= ?1 "
      "ORDER BY d.next_attempt_at, d.event_id LIMIT ?2");
  q.BindInt(1, now).BindInt(2, std::clamp(limit, 1, 10000));
  std::vector<DueDelivery> out;
  while (q.Step()) out.push_back({ReadEvent(q), ReadDelivery(q, kEventColumnCount)});
  return out;
}

}  // namespace

Result<std::vector<DueDelivery>> SqlStore::DueDeliveries(int64_t now, int limit) {
  return Guard([&]() -> Result<std::vector<DueDelivery>> {
    return db_->Read([&](Connection& c) { return SelectDue(c, now, limit); });
  });
}

// fleet: a claim is a conditional UPDATE per delivery read: the row is
// taken only while it is still undelivered and due. Two appliances that
// read the same row both try; on PostgreSQL (READ COMMITTED) the second
// UPDATE waits for the first's commit, re-reads the row, finds it no longer
// due and changes nothing; on SQLite the writers are serialised anyway.
// Portable SQL, no FOR UPDATE SKIP LOCKED (SQLite has none).
Result<std::vector<DueDelivery>> SqlStore::ClaimDueDeliveries(int64_t now, int limit, int64_t lease_seconds) {
  return Guard([&]() -> Result<std::vector<DueDelivery>> {
    if (lease_seconds < 1) return Status::InvalidArgument("field_invalid", "a delivery lease is at least 1 s");
    return db_->Write([&](Connection& c) {
      std::vector<DueDelivery> claimed;
      for (DueDelivery& d : SelectDue(c, now, limit)) {
        Stmt u = c.Prepare(
            "UPDATE event_deliveries SET next_attempt_at = ?3 "
            "WHERE event_id = ?1 AND webhook = ?2 AND delivered_at IS NULL AND next_attempt_at <= ?4");
        u.BindInt(1, d.event.id).BindText(2, d.delivery.webhook).BindInt(3, now + lease_seconds).BindInt(4, now).Run();
        if (c.Changes() != 1) continue;
        d.delivery.next_attempt_at = now + lease_seconds;
        claimed.push_back(std::move(d));
      }
      return claimed;
    });
  });
}

Status SqlStore::RecordDeliveryAttempt(int64_t event_id, const std::string& webhook, bool delivered,
                                          int64_t next_attempt_at, const std::string& error, int64_t now) {
  return Guard([&]() -> Status {
    db_->Write([&](Connection& c) {
      Stmt s = c.Prepare(
          "UPDATE event_deliveries SET attempts = attempts + 1, "
          "delivered_at = CASE WHEN ?3 <> 0 THEN ?4 ELSE NULL END, "
          "next_attempt_at = CASE WHEN ?3 <> 0 THEN next_attempt_at ELSE ?5 END, "
          "last_error = CASE WHEN ?3 <> 0 THEN last_error ELSE ?6 END "
          "WHERE event_id = ?1 AND webhook = ?2 AND delivered_at IS NULL");
      s.BindInt(1, event_id)
          .BindText(2, webhook)
          .BindInt(3, delivered ? 1 : 0)
          .BindInt(4, now)
          .BindInt(5, next_attempt_at)
          .BindText(6, BoundedError(error))
          .Run();
    });
    return Status::Ok();
  });
}

Result<std::vector<Event>> SqlStore::ListEvents(const EventFilter& filter) {
  return Guard([&]() -> Result<std::vector<Event>> {
    return db_->Read([&](Connection& c) {
      std::string sql = kEventColumns;
      if (filter.pending_only) {
        sql += "WHERE EXISTS (SELECT 1 FROM event_deliveries d WHERE d.event_id = e.id AND d.delivered_at IS NULL) ";
      }
      sql += "ORDER BY e.id DESC LIMIT ?1";
      Stmt s = c.Prepare(sql);
      s.BindInt(1, std::clamp(filter.limit, 1, 10000));
      std::vector<Event> out;
      std::map<int64_t, size_t> index;
      while (s.Step()) {
        index[s.Int(0)] = out.size();
        out.push_back(ReadEvent(s));
      }
      if (out.empty()) return out;
      Stmt d = c.Prepare(
          "SELECT event_id, webhook, attempts, next_attempt_at, delivered_at, last_error FROM event_deliveries "
          "WHERE event_id BETWEEN ?1 AND ?2 ORDER BY event_id, webhook");
      d.BindInt(1, out.back().id).BindInt(2, out.front().id);
      while (d.Step()) {
        auto it = index.find(d.Int(0));
        if (it != index.end()) out[it->second].deliveries.push_back(ReadDelivery(d, 1));
      }
      return out;
    });
  });
}

Result<int64_t> SqlStore::CountPendingDeliveries() {
  return Guard([&]() -> Result<int64_t> {
    return db_->Read([&](Connection& c) -> int64_t {
      Stmt s = c.Prepare("SELECT count(*) FROM event_deliveries WHERE delivered_at IS NULL");
      return s.Step() ? s.Int(0) : 0;
    });
  });
}

Result<int64_t> SqlStore::PurgeEvents(int64_t older_than, int64_t keep_at_most) {
  return Guard([&]() -> Result<int64_t> {
    return db_->Write([&](Connection& c) -> int64_t {
      Stmt old = c.Prepare("DELETE FROM events WHERE at < ?1");
      old.BindInt(1, older_than).Run();
      int64_t n = c.Changes();
      // Over the count, the oldest events every webhook has received go
      // first; an event some webhook still waits for goes only when
      // delivered ones alone cannot bring the count down (docs/events.md):
      // a flood of new events never pushes out an undelivered
      // machine_revoked while delivered ones are kept.
      Stmt count = c.Prepare("SELECT count(*) FROM events");
      const int64_t total = count.Step() ? count.Int(0) : 0;
      int64_t excess = total - std::max<int64_t>(keep_at_most, 0);
      if (excess <= 0) return n;
      Stmt delivered = c.Prepare(
          "DELETE FROM events WHERE id IN (SELECT e.id FROM events e WHERE NOT EXISTS "
          "(SELECT 1 FROM event_deliveries d WHERE d.event_id = e.id AND d.delivered_at IS NULL) "
          "ORDER BY e.id LIMIT ?1)");
      delivered.BindInt(1, excess).Run();
      n += c.Changes();
      excess -= c.Changes();
      if (excess <= 0) return n;
      Stmt undelivered = c.Prepare("DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT ?1)");
      undelivered.BindInt(1, excess).Run();
      n += c.Changes();
      return n;
    });
  });
}

}  // namespace rackgate::storage
