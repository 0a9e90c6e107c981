// The database schema as a list of forward-only migrations.
#include "storage/schema.h"

#include <string>

#include "storage/audit.h"
#include "storage/sqlite.h"

namespace rackgate::storage {

namespace {

// Version 1: the enrollment store. Every table is STRICT (a wrong type is an
// error, not a silent conversion).
constexpr char kV1[] = R"sql(
PRAGMA application_id = 1380401492;

CREATE TABLE pools (
  name             TEXT PRIMARY KEY NOT NULL,
  settings_json    TEXT NOT NULL DEFAULT '{}',
  boot_policy_json TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL
) STRICT;

CREATE TABLE machines (
  id               INTEGER PRIMARY KEY,
  hostname         TEXT NOT NULL UNIQUE,
  pool             TEXT NOT NULL REFERENCES pools(name) ON UPDATE RESTRICT ON DELETE RESTRICT,
  state            TEXT NOT NULL
                   CHECK (state IN ('pending', 'enrolled', 'attested', 'provisioned', 'joined', 'revoked')),
  -- Empty when the machine was enrolled from its EK certificate alone (a
  -- vendor inventory ships certificates, not public areas).
  ek_public        BLOB NOT NULL,
  ek_hash          BLOB NOT NULL UNIQUE CHECK (length(ek_hash) > 0),
  ek_certificate   BLOB,
  tpm_manufacturer TEXT NOT NULL DEFAULT '',
  tpm_model        TEXT NOT NULL DEFAULT '',
  tpm_version      TEXT NOT NULL DEFAULT '',
  policy_json      TEXT,
  tofu_pcrs_json   TEXT,
  -- Bumped when the EK is replaced and at every reset: attestations of an
  -- older epoch are no baseline for the TPM's counters.
  attest_epoch     INTEGER NOT NULL DEFAULT 0,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  last_attested_at INTEGER
,
  CHECK (length(ek_public) > 0 OR ek_certificate IS NOT NULL)
) STRICT;
CREATE INDEX machines_pool_state ON machines(pool, state);
CREATE INDEX machines_state ON machines(state);

CREATE TABLE addresses (
  machine_id INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  kind       TEXT NOT NULL
             CHECK (kind IN ('InternalIP', 'ExternalIP', 'InternalDNS', 'ExternalDNS', 'Hostname')),
  value      TEXT NOT NULL CHECK (length(value) > 0),
  PRIMARY KEY (machine_id, kind, value)
) STRICT, WITHOUT ROWID;

CREATE TABLE sessions (
  id            TEXT PRIMARY KEY NOT NULL,
  machine_id    INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  nonce         BLOB NOT NULL,
  secret_hash   BLOB NOT NULL,  -- the activation secret's hash, never the secret
  ak_public     BLOB NOT NULL,
  ak_name       BLOB NOT NULL,
  pcr_selection TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  used_at       INTEGER
) STRICT;
CREATE INDEX sessions_expires ON sessions(expires_at);
CREATE INDEX sessions_machine ON sessions(machine_id);

-- session_id is informational: sessions are purged long before the audit
-- trail of a token matters, so it is no foreign key.
CREATE TABLE tokens (
  hash       BLOB PRIMARY KEY NOT NULL,  -- the caller's hash; raw tokens are never stored
  machine_id INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  session_id TEXT NOT NULL,
  issued_at  INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX tokens_expires ON tokens(expires_at);
CREATE INDEX tokens_machine ON tokens(machine_id);

-- clock and firmware_version are the TPM's uint64 values stored bit for bit.
CREATE TABLE attestations (
  id               INTEGER PRIMARY KEY,
  machine_id       INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  attest_epoch     INTEGER NOT NULL,
  session_id       TEXT NOT NULL,
  at               INTEGER NOT NULL,
  verdict          TEXT NOT NULL CHECK (verdict IN ('ok', 'refused')),
  reason           TEXT NOT NULL DEFAULT '',
  reasons_json     TEXT NOT NULL DEFAULT '[]',
  pcrs_json        TEXT NOT NULL DEFAULT '',
  reset_count      INTEGER NOT NULL DEFAULT 0,
  restart_count    INTEGER NOT NULL DEFAULT 0,
  clock            INTEGER NOT NULL DEFAULT 0,
  firmware_version INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX attestations_machine ON attestations(machine_id, verdict, id);
CREATE INDEX attestations_verdict ON attestations(verdict, id);

-- Append-only: the code only ever INSERTs, and these triggers refuse the
-- rest, so a bug (or an injected statement) cannot rewrite history. machine_id
-- is no foreign key: the log outlives what it names.
CREATE TABLE audit (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  at          INTEGER NOT NULL,
  actor       TEXT NOT NULL,
  action      TEXT NOT NULL,
  machine_id  INTEGER,
  hostname    TEXT NOT NULL DEFAULT '',
  from_state  TEXT,
  to_state    TEXT,
  why         TEXT NOT NULL DEFAULT '',
  detail_json TEXT NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX audit_hostname ON audit(hostname, id);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;
)sql";

// Version 2: the kubelet client-certificate mark (set when a client CSR is
// signed, cleared by reset), for "no client certificate already issued".
constexpr char kV2[] = R"sql(
ALTER TABLE machines ADD COLUMN client_cert_issued_at INTEGER;
)sql";

// Version 3: Ignition serving and CSR vouching.
//  - pools carry a public and an attested Ignition template, and whether
//    /config/{pool} needs a provisioning token. Pools that existed before v3
//    served no config and had no token, so they start with the token off
//    (new pools get it on: the daemon decides).
//  - pool_tokens: provisioning tokens by hash; expires_at NULL marks the
//    current one, a set expires_at the previous one's grace period.
//  - machines.vars_json: operator-set values for template rendering.
//  - tokens remember the session's nonce and AK, for a TPM2_Certify made
//    with them after the attestation (TPM-resident kubelet keys).
//  - certificates: every certificate signed for a machine. machine_id is no
//    foreign key: the record outlives what it names, as the audit log does.
constexpr char kV3[] = R"sql(
ALTER TABLE pools ADD COLUMN public_template TEXT;
ALTER TABLE pools ADD COLUMN attested_template TEXT;
ALTER TABLE pools ADD COLUMN token_required INTEGER NOT NULL DEFAULT 0 CHECK (token_required IN (0, 1));

CREATE TABLE pool_tokens (
  hash       BLOB PRIMARY KEY NOT NULL,
  pool       TEXT NOT NULL REFERENCES pools(name) ON UPDATE RESTRICT ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  expires_at INTEGER
) STRICT, WITHOUT ROWID;
CREATE UNIQUE INDEX pool_tokens_current ON pool_tokens(pool) WHERE expires_at IS NULL;
CREATE INDEX pool_tokens_pool ON pool_tokens(pool);

ALTER TABLE machines ADD COLUMN vars_json TEXT NOT NULL DEFAULT '{}';

ALTER TABLE tokens ADD COLUMN nonce BLOB NOT NULL DEFAULT x'';
ALTER TABLE tokens ADD COLUMN ak_public BLOB NOT NULL DEFAULT x'';

CREATE TABLE certificates (
  serial            TEXT PRIMARY KEY NOT NULL,
  machine_id        INTEGER NOT NULL,
  hostname          TEXT NOT NULL,
  kind              TEXT NOT NULL CHECK (kind IN ('client', 'serving')),
  subject           TEXT NOT NULL,
  sans_json         TEXT NOT NULL DEFAULT '[]',
  public_key_sha256 BLOB NOT NULL,
  tpm_resident      INTEGER NOT NULL DEFAULT 0 CHECK (tpm_resident IN (0, 1)),
  not_before        INTEGER NOT NULL,
  not_after         INTEGER NOT NULL,
  issued_at         INTEGER NOT NULL,
  certificate_pem   TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX certificates_machine ON certificates(machine_id, issued_at);
CREATE INDEX certificates_hostname ON certificates(hostname, issued_at);
)sql";

// Manual CSR approval (docs/csr.md, "Manual approval"): CSRs that passed
// every rule and wait for an operator, and the operator's decision.
constexpr char kV4Approval[] = R"sql(
CREATE TABLE csr_requests (
  id                INTEGER PRIMARY KEY,
  machine_id        INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  attest_epoch      INTEGER NOT NULL,
  kind              TEXT NOT NULL CHECK (kind IN ('client', 'serving')),
  public_key_sha256 BLOB NOT NULL,
  csr_pem           TEXT NOT NULL,
  usages_json       TEXT NOT NULL DEFAULT '[]',
  tpm_resident      INTEGER NOT NULL DEFAULT 0 CHECK (tpm_resident IN (0, 1)),
  state             TEXT NOT NULL CHECK (state IN ('waiting', 'approved', 'denied')),
  deny_reason       TEXT NOT NULL DEFAULT '',
  decided_by        TEXT NOT NULL DEFAULT '',
  created_at        INTEGER NOT NULL,
  decided_at        INTEGER
) STRICT;
CREATE UNIQUE INDEX csr_requests_key ON csr_requests(machine_id, attest_epoch, kind, public_key_sha256);
CREATE INDEX csr_requests_state ON csr_requests(state, created_at);
)sql";

// Version 5 (renew): renewal by re-attestation and one nonce, one use
// (docs/csr.md, "Renewal" and "One nonce, one use").
//  - tokens.certify_nonce_used_at: when the session's nonce served as a
//    TPM2_Certify's qualifying data for a CSR; a second CSR with it is
//    refused (certify_nonce_used).
//  - certificates.attest_epoch: the machine's epoch when it was signed, so a
//    certificate from before a reset or an EK replacement is never renewed.
//    Rows from before v4 get the machine's current epoch when they were
//    issued after its last reset or EK replacement (the audit log says
//    when), else -1 (never current again).
//  - certificates.replaced_by: the serial of the certificate that renewed
//    this one; a replaced certificate is renewed no more.
constexpr char kV5Renew[] = R"sql(
ALTER TABLE tokens ADD COLUMN certify_nonce_used_at INTEGER;
ALTER TABLE certificates ADD COLUMN attest_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE certificates ADD COLUMN replaced_by TEXT;
UPDATE certificates SET attest_epoch = CASE
  WHEN issued_at >= COALESCE((SELECT max(a.at) FROM audit a WHERE a.machine_id = certificates.machine_id
                                AND a.action IN ('reset', 'replace_ek')), 0)
  THEN COALESCE((SELECT m.attest_epoch FROM machines m WHERE m.id = certificates.machine_id), -1)
  ELSE -1 END;
)sql";

// Version 6 (events): webhook events (docs/events.md), fed by the database
// itself. Triggers on audit and attestations write the event in the SAME
// transaction (the same statement, even) as the change it reports, so no
// code path can change a machine and forget to tell: a crash either loses
// both or keeps both. A second trigger fans each event out into one delivery
// row per configured webhook whose filter takes it, again atomically.
//  - events: what happened, to which machine, by whom. detail_json is the
//    audit row's detail (never a secret); a refused attestation's reason
//    and reasons_json are copied as they are and made into the detail when
//    read. (Triggers use no JSON functions: the connections run with
//    trusted_schema off, under which SQLite 3.40 refuses them in triggers.)
//  - webhooks: the configured URLs and their filters, written by rackgated
//    at start from its config. types is ",t1,t2," ('' takes every type). A
//    webhook dropped from the config takes its undelivered deliveries along.
//  - event_deliveries: per event and webhook, the delivery's state.
// Retention is the daemon's (events older than 14 days are purged, delivered
// or not, and at most 100000 are kept); deliveries go with their event.
constexpr char kV6Events[] = R"sql(
CREATE TABLE events (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  at             INTEGER NOT NULL,
  type           TEXT NOT NULL
                 CHECK (type IN ('attestation_failed', 'machine_untrusted', 'machine_trusted', 'machine_revoked',
                                 'certificate_issued', 'certificate_renewed', 'csr_waiting')),
  machine_id     INTEGER,
  hostname       TEXT NOT NULL DEFAULT '',
  pool           TEXT NOT NULL DEFAULT '',
  actor          TEXT NOT NULL DEFAULT '',
  why            TEXT NOT NULL DEFAULT '',
  detail_json    TEXT NOT NULL DEFAULT '{}',
  attestation_id INTEGER,
  reason         TEXT NOT NULL DEFAULT '',
  reasons_json   TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE INDEX events_at ON events(at);

CREATE TABLE webhooks (
  url      TEXT PRIMARY KEY NOT NULL,
  types    TEXT NOT NULL DEFAULT '',
  added_at INTEGER NOT NULL
) STRICT;

CREATE TABLE event_deliveries (
  event_id        INTEGER NOT NULL REFERENCES events(id) ON DELETE CASCADE,
  webhook         TEXT NOT NULL REFERENCES webhooks(url) ON DELETE CASCADE,
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  delivered_at    INTEGER,
  last_error      TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (event_id, webhook)
) STRICT, WITHOUT ROWID;
CREATE INDEX event_deliveries_due ON event_deliveries(next_attempt_at) WHERE delivered_at IS NULL;
CREATE INDEX event_deliveries_webhook ON event_deliveries(webhook);

CREATE TRIGGER events_from_audit AFTER INSERT ON audit
WHEN NEW.action IN ('untrusted', 'trusted', 'revoke', 'certificate_issued', 'certificate_renewed', 'csr_waiting')
BEGIN
  INSERT INTO events (at, type, machine_id, hostname, pool, actor, why, detail_json)
  VALUES (NEW.at,
          CASE NEW.action
            WHEN 'untrusted' THEN 'machine_untrusted'
            WHEN 'trusted' THEN 'machine_trusted'
            WHEN 'revoke' THEN 'machine_revoked'
            ELSE NEW.action
          END,
          NEW.machine_id, NEW.hostname,
          COALESCE((SELECT pool FROM machines WHERE id = NEW.machine_id), ''),
          NEW.actor, NEW.why, NEW.detail_json);
END;

-- Failures of unknown EKs are never stored (no machine), so every refused
-- row names a machine; the join keeps it that way.
CREATE TRIGGER events_from_attestations AFTER INSERT ON attestations
WHEN NEW.verdict = 'refused'
BEGIN
  INSERT INTO events (at, type, machine_id, hostname, pool, actor, attestation_id, reason, reasons_json)
  SELECT NEW.at, 'attestation_failed', m.id, m.hostname, m.pool, 'attestation', NEW.id, NEW.reason,
         NEW.reasons_json
  FROM machines m WHERE m.id = NEW.machine_id;
END;

CREATE TRIGGER events_fan_out AFTER INSERT ON events
BEGIN
  INSERT INTO event_deliveries (event_id, webhook, next_attempt_at)
  SELECT NEW.id, w.url, NEW.at FROM webhooks w
  WHERE w.types = '' OR instr(w.types, ',' || NEW.type || ',') > 0;
END;
)sql";

// Trust (docs/trust.md): a machine's verdict over time, orthogonal to its
// state, and the last provisioning report its agent sent. A machine that
// attested before this version is judged from its newest attestation row
// (refused: untrusted); one that never attested has no verdict (NULL).
constexpr char kV7Trust[] = R"sql(
ALTER TABLE machines ADD COLUMN trust TEXT CHECK (trust IN ('trusted', 'untrusted'));
ALTER TABLE machines ADD COLUMN trust_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE machines ADD COLUMN trust_changed_at INTEGER;

UPDATE machines SET
  trust = CASE WHEN (SELECT a.verdict FROM attestations a WHERE a.machine_id = machines.id
                     ORDER BY a.id DESC LIMIT 1) = 'refused' THEN 'untrusted' ELSE 'trusted' END,
  trust_reason = COALESCE((SELECT 'attestation_failed:' || a.reason FROM attestations a
                           WHERE a.machine_id = machines.id ORDER BY a.id DESC LIMIT 1 ), ''),
  trust_changed_at = (SELECT a.at FROM attestations a WHERE a.machine_id = machines.id ORDER BY a.id DESC LIMIT 1)
WHERE last_attested_at IS NOT NULL OR EXISTS (SELECT 1 FROM attestations a WHERE a.machine_id = machines.id);
UPDATE machines SET trust_reason = '' WHERE trust = 'trusted';
CREATE INDEX machines_trust ON machines(trust);

CREATE TABLE machine_reports (
  machine_id  INTEGER PRIMARY KEY REFERENCES machines(id) ON DELETE CASCADE,
  at          INTEGER NOT NULL,
  outcome     TEXT NOT NULL CHECK (outcome IN ('ok', 'failed')),
  step        TEXT NOT NULL,
  reason      TEXT NOT NULL DEFAULT '',
  message     TEXT NOT NULL DEFAULT '',
  exit_status INTEGER NOT NULL DEFAULT 0,
  done_json   TEXT NOT NULL DEFAULT '[]'
) STRICT;
)sql";

// The audit log's hash chain (docs/audit.md): every row carries the previous
// row's hash and its own. BackfillAuditChain (storage/audit.cc) chains the
// rows written before this version, in this transaction. A row inserted any
// other way has no hash, and `audit verify` names it (unchained).
constexpr char kV8AuditChain[] = R"sql(
ALTER TABLE audit ADD COLUMN prev_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash TEXT NOT NULL DEFAULT '';
)sql";

// Boot policy observation (docs/policy.md, "Observe"): a pool's mode, and
// each machine's latest observed boot (its log and quoted PCRs) for
// `policy propose`.
constexpr char kV9Observe[] = R"sql(
ALTER TABLE pools ADD COLUMN boot_policy_mode TEXT NOT NULL DEFAULT 'enforce'
  CHECK (boot_policy_mode IN ('enforce', 'observe'));

CREATE TABLE boot_observations (
  machine_id      INTEGER PRIMARY KEY REFERENCES machines(id) ON DELETE CASCADE,
  pool            TEXT NOT NULL,
  at              INTEGER NOT NULL,
  event_log       BLOB NOT NULL,
  pcrs_json       TEXT NOT NULL,
  verdict         TEXT NOT NULL CHECK (verdict IN ('pass', 'fail', 'none')),
  violations_json TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE INDEX boot_observations_pool ON boot_observations(pool);
)sql";

// Anonymous refusals (docs/trust.md): evidence refused before its sender
// proved it holds the machine's TPM never reaches the machine's history; at
// most one audit row per machine per interval (action anonymous_refusals)
// summarises them, and becomes an event of that type. SQLite cannot change a
// CHECK in place, so events and event_deliveries are rebuilt (inside the
// migration's transaction, with foreign keys on): triggers dropped, rows
// copied to new tables, the old ones dropped child first, the new ones
// renamed (which carries the references and sqlite_sequence along), indexes
// and triggers made again. The events' AUTOINCREMENT counter is carried over,
// so no event id is ever used twice (receivers drop a repeated id).
constexpr char kV10AnonymousRefusals[] = R"sql(
DROP TRIGGER events_from_audit;
DROP TRIGGER events_from_attestations;
DROP TRIGGER events_fan_out;

CREATE TABLE events_v10 (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  at             INTEGER NOT NULL,
  type           TEXT NOT NULL
                 CHECK (type IN ('attestation_failed', 'machine_untrusted', 'machine_trusted', 'machine_revoked',
                                 'certificate_issued', 'certificate_renewed', 'csr_waiting',
                                 'anonymous_refusals')),
  machine_id     INTEGER,
  hostname       TEXT NOT NULL DEFAULT '',
  pool           TEXT NOT NULL DEFAULT '',
  actor          TEXT NOT NULL DEFAULT '',
  why            TEXT NOT NULL DEFAULT '',
  detail_json    TEXT NOT NULL DEFAULT '{}',
  attestation_id INTEGER,
  reason         TEXT NOT NULL DEFAULT '',
  reasons_json   TEXT NOT NULL DEFAULT '[]'
) STRICT;
INSERT INTO events_v10 SELECT id, at, type, machine_id, hostname, pool, actor, why, detail_json, attestation_id,
                              reason, reasons_json FROM events;
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_v10', 0 WHERE NOT EXISTS
  (SELECT 1 FROM sqlite_sequence WHERE name = 'events_v10');
UPDATE sqlite_sequence SET seq = max(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))
  WHERE name = 'events_v10';

CREATE TABLE event_deliveries_v10 (
  event_id        INTEGER NOT NULL REFERENCES events_v10(id) ON DELETE CASCADE,
  webhook         TEXT NOT NULL REFERENCES webhooks(url) ON DELETE CASCADE,
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  delivered_at    INTEGER,
  last_error      TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (event_id, webhook)
) STRICT, WITHOUT ROWID;
INSERT INTO event_deliveries_v10 SELECT event_id, webhook, attempts, next_attempt_at, delivered_at, last_error
  FROM event_deliveries;

DROP TABLE event_deliveries;
DROP TABLE events;
ALTER TABLE events_v10 RENAME TO events;
ALTER TABLE event_deliveries_v10 RENAME TO event_deliveries;
CREATE INDEX events_at ON events(at);
CREATE INDEX event_deliveries_due ON event_deliveries(next_attempt_at) WHERE delivered_at IS NULL;
CREATE INDEX event_deliveries_webhook ON event_deliveries(webhook);

CREATE TRIGGER events_from_audit AFTER INSERT ON audit
WHEN NEW.action IN ('untrusted', 'trusted', 'revoke', 'certificate_issued', 'certificate_renewed', 'csr_waiting',
                    'anonymous_refusals')
BEGIN
  INSERT INTO events (at, type, machine_id, hostname, pool, actor, why, detail_json)
  VALUES (NEW.at,
          CASE NEW.action
            WHEN 'untrusted' THEN 'machine_untrusted'
            WHEN 'trusted' THEN 'machine_trusted'
            WHEN 'revoke' THEN 'machine_revoked'
            ELSE NEW.action
          END,
          NEW.machine_id, NEW.hostname,
          COALESCE((SELECT pool FROM machines WHERE id = NEW.machine_id), ''),
          NEW.actor, NEW.why, NEW.detail_json);
END;

CREATE TRIGGER events_from_attestations AFTER INSERT ON attestations
WHEN NEW.verdict = 'refused'
BEGIN
  INSERT INTO events (at, type, machine_id, hostname, pool, actor, attestation_id, reason, reasons_json)
  SELECT NEW.at, 'attestation_failed', m.id, m.hostname, m.pool, 'attestation', NEW.id, NEW.reason,
         NEW.reasons_json
  FROM machines m WHERE m.id = NEW.machine_id;
END;

CREATE TRIGGER events_fan_out AFTER INSERT ON events
BEGIN
  INSERT INTO event_deliveries (event_id, webhook, next_attempt_at)
  SELECT NEW.id, w.url, NEW.at FROM webhooks w
  WHERE w.types = '' OR instr(w.types, ',' || NEW.type || ',') > 0;
END;
)sql";

// Approver mode (docs/kubernetes.md; storage/roles.h, KubeApprovalStore):
//  - attested_keys: the kubelet keys machines proved through an attested
//    session, per attest epoch (a reset or a new EK makes them stale, as
//    csr_requests), and the API CSR (uid) a join was approved with.
//  - kube_csrs: every certificates.k8s.io CSR rackgate decided or holds for
//    an operator, by the API object's uid, recorded before the API server is
//    told, so no CSR is decided twice.
// The audit actions they write (kubelet_key_registered, kubernetes_csr_*)
// are no webhook events here; version 12 makes the kubernetes_csr_* ones
// events.
constexpr char kV11KubeApprovals[] = R"sql(
CREATE TABLE attested_keys (
  machine_id        INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  attest_epoch      INTEGER NOT NULL,
  kind              TEXT NOT NULL CHECK (kind IN ('client', 'serving')),
  public_key_sha256 BLOB NOT NULL CHECK (length(public_key_sha256) = 32),
  tpm_resident      INTEGER NOT NULL DEFAULT 0 CHECK (tpm_resident IN (0, 1)),
  registered_at     INTEGER NOT NULL,
  used_by_uid       TEXT NOT NULL DEFAULT '',
  UNIQUE (machine_id, attest_epoch, kind, public_key_sha256)
) STRICT;

CREATE TABLE kube_csrs (
  uid               TEXT PRIMARY KEY NOT NULL,
  name              TEXT NOT NULL,
  machine_id        INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
  kind              TEXT NOT NULL CHECK (kind IN ('client', 'serving')),
  purpose           TEXT NOT NULL CHECK (purpose IN ('join', 'rotation', 'serving')),
  public_key_sha256 BLOB NOT NULL,
  requester         TEXT NOT NULL DEFAULT '',
  decision          TEXT NOT NULL CHECK (decision IN ('waiting', 'approved', 'denied')),
  reason            TEXT NOT NULL DEFAULT '',
  message           TEXT NOT NULL DEFAULT '',
  decided_by        TEXT NOT NULL DEFAULT '',
  created_at        INTEGER NOT NULL,
  decided_at        INTEGER
) STRICT;
CREATE INDEX kube_csrs_decision ON kube_csrs(decision, created_at);
CREATE INDEX kube_csrs_machine ON kube_csrs(machine_id);
)sql";

// Approver mode's decisions as webhook events (docs/events.md): the audit
// actions kubernetes_csr_approved, kubernetes_csr_denied and
// kubernetes_csr_waiting become events of the same names (kubelet_key_registered
// stays none). events and event_deliveries are rebuilt as version 10 rebuilt
// them, for the same reason (a CHECK cannot change in place) and the same
// way: triggers dropped, rows copied, the old tables dropped child first, the
// new ones renamed, indexes and triggers made again, and the events'
// AUTOINCREMENT counter carried over.
constexpr char kV12KubeCsrEvents[] = R"sql(
DROP TRIGGER events_from_audit;
DROP TRIGGER events_from_attestations;
DROP TRIGGER events_fan_out;

CREATE TABLE events_v12 (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  at             INTEGER NOT NULL,
  type           TEXT NOT NULL
                 CHECK (type IN ('attestation_failed', 'machine_untrusted', 'machine_trusted', 'machine_revoked',
                                 'certificate_issued', 'certificate_renewed', 'csr_waiting',
                                 'anonymous_refusals', 'kubernetes_csr_approved', 'kubernetes_csr_denied',
                                 'kubernetes_csr_waiting')),
  machine_id     INTEGER,
  hostname       TEXT NOT NULL DEFAULT '',
  pool           TEXT NOT NULL DEFAULT '',
  actor          TEXT NOT NULL DEFAULT '',
  why            TEXT NOT NULL DEFAULT '',
  detail_json    TEXT NOT NULL DEFAULT '{}',
  attestation_id INTEGER,
  reason         TEXT NOT NULL DEFAULT '',
  reasons_json   TEXT NOT NULL DEFAULT '[]'
) STRICT;
INSERT INTO events_v12 SELECT id, at, type, machine_id, hostname, pool, actor, why, detail_json, attestation_id,
                              reason, reasons_json FROM events;
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_v12', 0 WHERE NOT EXISTS
  (SELECT 1 FROM sqlite_sequence WHERE name = 'events_v12');
UPDATE sqlite_sequence SET seq = max(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))
  WHERE name = 'events_v12';

CREATE TABLE event_deliveries_v12 (
  event_id        INTEGER NOT NULL REFERENCES events_v12(id) ON DELETE CASCADE,
  webhook         TEXT NOT NULL REFERENCES webhooks(url) ON DELETE CASCADE,
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  delivered_at    INTEGER,
  last_error      TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (event_id, webhook)
) STRICT, WITHOUT ROWID;
INSERT INTO event_deliveries_v12 SELECT event_id, webhook, attempts, next_attempt_at, delivered_at, last_error
  FROM event_deliveries;

DROP TABLE event_deliveries;
DROP TABLE events;
ALTER TABLE events_v12 RENAME TO events;
ALTER TABLE event_deliveries_v12 RENAME TO event_deliveries;
CREATE INDEX events_at ON events(at);
CREATE INDEX event_deliveries_due ON event_deliveries(next_attempt_at) WHERE delivered_at IS NULL;
CREATE INDEX event_deliveries_webhook ON event_deliveries(webhook);

CREATE TRIGGER events_from_audit AFTER INSERT ON audit
WHEN NEW.action IN ('untrusted', 'trusted', 'revoke', 'certificate_issued', 'certificate_renewed', 'csr_waiting',
                    'anonymous_refusals', 'kubernetes_csr_approved', 'kubernetes_csr_denied',
                    'kubernetes_csr_waiting')
BEGIN
  INSERT INTO events (at, type, machine_id, hostname, pool, actor, why, detail_json)
  VALUES (NEW.at,
          CASE NEW.action
            WHEN 'untrusted' THEN 'machine_untrusted'
            WHEN 'trusted' THEN 'machine_trusted'
            WHEN 'revoke' THEN 'machine_revoked'
            ELSE NEW.action
          END,
          NEW.machine_id, NEW.hostname,
          COALESCE((SELECT pool FROM machines WHERE id = NEW.machine_id), ''),
          NEW.actor, NEW.why, NEW.detail_json);
END;

CREATE TRIGGER events_from_attestations AFTER INSERT ON attestations
WHEN NEW.verdict = 'refused'
BEGIN
  INSERT INTO events (at, type, machine_id, hostname, pool, actor, attestation_id, reason, reasons_json)
  SELECT NEW.at, 'attestation_failed', m.id, m.hostname, m.pool, 'attestation', NEW.id, NEW.reason,
         NEW.reasons_json
  FROM machines m WHERE m.id = NEW.machine_id;
END;

CREATE TRIGGER events_fan_out AFTER INSERT ON events
BEGIN
  INSERT INTO event_deliveries (event_id, webhook, next_attempt_at)
  SELECT NEW.id, w.url, NEW.at FROM webhooks w
  WHERE w.types = '' OR instr(w.types, ',' || NEW.type || ',') > 0;
END;
)sql";

// Version 13: the fleet's CA rotation record (docs/operations.md, "Rotating
// the appliance CA"): one row per kind while a rotation runs. Certificates
// only; the keys stay files of each appliance.
constexpr char kV13CaRotations[] = R"sql(
CREATE TABLE ca_rotations (
  kind            TEXT PRIMARY KEY CHECK (kind IN ('appliance')),
  stage           TEXT NOT NULL CHECK (stage IN ('prepared', 'switched')),
  current_pem     TEXT NOT NULL,
  current_sha256  TEXT NOT NULL,
  next_pem        TEXT NOT NULL,
  next_sha256     TEXT NOT NULL,
  prepared_at     INTEGER NOT NULL,
  switched_at     INTEGER
);
)sql";

constexpr Migration kMigrations[] = {
    {1, "enrollment store: pools, machines, addresses, sessions, tokens, attestations, audit", kV1},
    {2, "machines.client_cert_issued_at", kV2},
    {3, "Ignition templates, provisioning tokens, machine vars, certificates", kV3},
    {4, "csr_requests: CSRs waiting for an operator", kV4Approval},
    {5, "renewal: certificates.attest_epoch and replaced_by; tokens.certify_nonce_used_at", kV5Renew},
    {6, "webhook events: events fed by triggers on audit and attestations, webhooks, deliveries", kV6Events},
    {7, "machine trust (trust, trust_reason, trust_changed_at), machine_reports", kV7Trust},
    {8, "audit hash chain: audit.prev_hash and hash, existing rows chained", kV8AuditChain, BackfillAuditChain},
    {9, "boot policy observation: pools.boot_policy_mode, boot_observations", kV9Observe},
    {10, "anonymous refusals: event type anonymous_refusals (events and event_deliveries rebuilt)",
     kV10AnonymousRefusals},
    {11, "approver mode: attested_keys, kube_csrs", kV11KubeApprovals},
    {12,
     "approver mode's decisions as events: event types kubernetes_csr_approved, kubernetes_csr_denied, "
     "kubernetes_csr_waiting (events and event_deliveries rebuilt)",
     kV12KubeCsrEvents},
    {13, "appliance CA rotation: ca_rotations", kV13CaRotations},
};

int ReadPragmaInt(Connection* conn, const char* sql) {
  Stmt s = conn->Prepare(sql);
  if (!s.Step()) Fail(Status::IoError("db_error", std::string(sql) + " returned nothing"));
  return static_cast<int>(s.Int(0));
}

Status NewerThanCode(int version) {
  return Status::Unsupported("db_newer_than_code",
                             "the database has schema version " + std::to_string(version) +
                                 ", newer than this rackgate's " + std::to_string(LatestSchemaVersion()) +
                                 "; run the rackgate that wrote it, or restore a backup");
}

// A file at version 0 may be brand new (no tables) or someone else's.
void CheckIdentity(Connection* conn, int version) {
  const int app = ReadPragmaInt(conn, "PRAGMA application_id");
  if (version == 0) {
    Stmt s = conn->Prepare("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'");
    const bool has_tables = s.Step() && s.Int(0) > 0;
    if (!has_tables && (app == 0 || app == kApplicationId)) return;
  } else if (app == kApplicationId) {
    return;
  }
  Fail(Status::Unsupported("db_not_rackgate", "the file is an SQLite database of something else"));
}

}  // namespace

std::span<const Migration> Migrations() { return kMigrations; }

int LatestSchemaVersion() { return kMigrations[std::size(kMigrations) - 1].version; }

Result<int> SchemaVersion(Connection* conn) {
  try {
    return ReadPragmaInt(conn, "PRAGMA user_version");
  } catch (const StoreError& e) {
    return e.status();
  }
}

Status Migrate(Connection* conn, int target) {
  try {
    int version = ReadPragmaInt(conn, "PRAGMA user_version");
    if (version > LatestSchemaVersion()) return NewerThanCode(version);
    CheckIdentity(conn, version);
    while (version < target) {
      Transaction txn(conn, Transaction::Kind::kWrite);
      // Another process may have migrated between our read and our lock.
      version = ReadPragmaInt(conn, "PRAGMA user_version");
      if (version > LatestSchemaVersion()) return NewerThanCode(version);
      if (version >= target) break;
      const Migration& m = kMigrations[version];
      conn->Exec(m.sql);
      if (m.after_sql != nullptr) m.after_sql(conn);
      conn->Exec(("PRAGMA user_version = " + std::to_string(m.version)).c_str());
      // A migration must leave every foreign key satisfied.
      Stmt check = conn->Prepare("PRAGMA foreign_key_check");
      if (check.Step()) {
        return Status::Corruption("db_corrupt", "migration to version " + std::to_string(m.version) +
                                                    " leaves a foreign key unsatisfied in table " + check.Text(0));
      }
      txn.Commit();
      ++version;
    }
  } catch (const StoreError& e) {
    return e.status().Annotate("migrate");
  }
  return Status::Ok();
}

}  // namespace rackgate::storage
