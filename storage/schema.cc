// The database schema as a list of forward-only migrations.
#include "storage/schema.h"

#include <string>

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

// Trust (docs/trust.md): a machine's verdict over time, orthogonal to its
// state, and the last provisioning report its agent sent. A machine that
// attested before this version is judged from its newest attestation row
// (refused: untrusted); one that never attested has no verdict (NULL).
constexpr char kV4Trust[] = R"sql(
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

constexpr Migration kMigrations[] = {
    {1, "enrollment store: pools, machines, addresses, sessions, tokens, attestations, audit", kV1},
    {2, "machines.client_cert_issued_at", kV2},
    {3, "Ignition templates, provisioning tokens, machine vars, certificates", kV3},
    {4, "machine trust (trust, trust_reason, trust_changed_at), machine_reports", kV4Trust},
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
