// Config serving and kubelet certificates: what was served and signed, and
// the state changes they make.
#include <algorithm>
#include <string>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"
#include "base/hex.h"

namespace rackgate::storage {

Result<Machine> SqlStore::RecordConfigServed(int64_t machine_id, const std::string& digest,
                                                const std::string& version, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckSize("digest", digest.size(), 1, 128);
    CheckSize("version", version.size(), 0, 32);
    return db_->WriteRerunnable([&](Connection& c) {
      Machine m = MustMachineById(c, machine_id);
      if (m.state != MachineState::kAttested && m.state != MachineState::kProvisioned &&
          m.state != MachineState::kJoined) {
        Fail(Status::InvalidArgument("state_conflict", MachineIs(m) + "; a config is served after attestation"));
      }
      // The row read above, with this change applied: not read again.
      Machine after = m;
      if (m.state == MachineState::kAttested) {
        Stmt s = c.Prepare("UPDATE machines SET state = ?2, updated_at = ?3 WHERE id = ?1");
        s.BindInt(1, m.id).BindText(2, StateName(MachineState::kProvisioned)).BindInt(3, now).Run();
        after.state = MachineState::kProvisioned;
        after.updated_at = now;
      }
      WriteAudit(c, actor, now,
                 {"config_served", &after, m.state, after.state, json{{"sha256", digest}, {"version", version}}});
      return after;
    });
  });
}

namespace {

// Inserts `cert` for machine `m` in the machine's current epoch, so that a
// reset or an EK replacement ends its renewals.
void InsertCertificate(Connection& c, const Machine& m, const IssuedCertificate& cert, int64_t now) {
  // A taken serial inserts nothing (one statement, not a check and an insert).
  Stmt s = c.Prepare(
      "INSERT INTO certificates (serial, machine_id, hostname, kind, subject, sans_json, public_key_sha256, "
      "tpm_resident, not_before, not_after, issued_at, certificate_pem, attest_epoch) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (serial) DO NOTHING");
  s.BindText(1, cert.serial)
      .BindInt(2, m.id)
      .BindText(3, m.hostname)
      .BindText(4, cert.kind)
      .BindText(5, cert.subject)
      .BindText(6, Dump(json(cert.sans)))
      .BindBlob(7, cert.public_key_sha256)
      .BindInt(8, cert.tpm_resident ? 1 : 0)
      .BindInt(9, cert.not_before)
      .BindInt(10, cert.not_after)
      .BindInt(11, now)
      .BindText(12, cert.certificate_pem)
      .BindInt(13, m.attest_epoch)
      .Run();
  if (c.Changes() != 1) Fail(Status::InvalidArgument("field_invalid", "the serial is taken"));
}

// RecordCertificate's checks and writes, inside the caller's write
// transaction.
Machine RecordFirstIn(Connection& c, const IssuedCertificate& cert, const Actor& actor, int64_t now) {
  const bool client = cert.kind == kCertClient;
  Machine m = MustMachineById(c, cert.machine_id);
  MachineState to = m.state;
  if (client) {
    if (m.client_cert_issued_at) {
      Fail(Status::VerificationFailed("client_cert_already_issued", "a client certificate was already issued to '" +
                                                                     m.hostname + "' since its last reset"));
    }
    if (m.state != MachineState::kAttested && m.state != MachineState::kProvisioned) {
      Fail(Status::InvalidArgument("state_conflict",
                                   MachineIs(m) + "; a client certificate needs attested or provisioned"));
    }
    to = MachineState::kJoined;
  } else if (m.state != MachineState::kProvisioned && m.state != MachineState::kJoined) {
    Fail(Status::InvalidArgument("state_conflict",
                                 MachineIs(m) + "; a serving certificate needs provisioned or joined"));
  }
  InsertCertificate(c, m, cert, now);
  // The row read above, with this change applied: not read again.
  Machine after = m;
  if (client) {
    Stmt s = c.Prepare("UPDATE machines SET state = ?2, client_cert_issued_at = ?3, updated_at = ?3 WHERE id = ?1");
    s.BindInt(1, m.id).BindText(2, StateName(to)).BindInt(3, now).Run();
    after.state = to;
    after.client_cert_issued_at = now;
    after.updated_at = now;
  }
  WriteAudit(c, actor, now,
             {"certificate_issued", &after, m.state, to,
              json{{"serial", cert.serial},
                   {"kind", cert.kind},
                   {"not_after", cert.not_after},
                   {"tpm_resident", cert.tpm_resident},
                   {"public_key_sha256", hex::Encode(cert.public_key_sha256)}}});
  return after;
}

// RecordRenewal's checks and writes, inside the caller's write transaction.
Machine RecordRenewalIn(Connection& c, const IssuedCertificate& cert, const std::string& replaces,
                        const Actor& actor, int64_t now) {
  Machine m = MustMachineById(c, cert.machine_id);
  // SECURITY: the core checked all of this before signing; checked again
  // here, in the transaction that records the renewal, so that two
  // racing renewals of one certificate cannot both be recorded and a
  // reset or revoke in between wins.
  if (m.state != MachineState::kJoined) {
    Fail(Status::InvalidArgument("state_conflict", MachineIs(m) + "; only a joined machine renews"));
  }
  {
    Stmt s = c.Prepare("SELECT machine_id, kind, attest_epoch, replaced_by FROM certificates WHERE serial = ?1");
    s.BindText(1, replaces);
    if (!s.Step() || s.Int(0) != m.id || s.Text(1) != cert.kind || s.Int(2) != m.attest_epoch) {
      Fail(Status::VerificationFailed("renewal_proof_invalid",
                                      "the renewed certificate is not this machine's current " + cert.kind +
                                          " certificate"));
    }
    if (!s.IsNull(3)) {
      Fail(Status::VerificationFailed("renewal_proof_invalid", "the certificate was already renewed"));
    }
  }
  InsertCertificate(c, m, cert, now);
  {
    Stmt s = c.Prepare("UPDATE certificates SET replaced_by = ?2 WHERE serial = ?1 AND replaced_by IS NULL");
    s.BindText(1, replaces).BindText(2, cert.serial).Run();
    if (c.Changes() != 1) {
      Fail(Status::VerificationFailed("renewal_proof_invalid", "the certificate was already renewed"));
    }
  }
  // The client-certificate mark stays set: the machine joined once, and
  // a renewal is the same identity with a new key.
  Machine after = MustMachineById(c, m.id);
  WriteAudit(c, actor, now,
             {"certificate_renewed", &after, m.state, after.state,
              json{{"serial", cert.serial},
                   {"replaces", replaces},
                   {"kind", cert.kind},
                   {"not_after", cert.not_after},
                   {"tpm_resident", cert.tpm_resident},
                   {"public_key_sha256", hex::Encode(cert.public_key_sha256)}}});
  return after;
}

}  // namespace

Result<Machine> SqlStore::RecordCertificate(const IssuedCertificate& cert, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    if (Status s = CheckCertificate(cert); !s.ok()) return s;
    return db_->Write([&](Connection& c) { return RecordFirstIn(c, cert, actor, now); });
  });
}

// --- renew ---------------------------------------------------------------------

Result<IssuedCertificate> SqlStore::GetCertificate(const std::string& serial) {
  return Guard([&]() -> Result<IssuedCertificate> {
    if (serial.empty() || serial.size() > 64) return Status::NotFound("certificate_unknown", "no such certificate");
    return db_->Read([&](Connection& c) {
      Stmt s = c.Prepare(std::string(kCertificateSelect) + "WHERE serial = ?1");
      s.BindText(1, serial);
      if (!s.Step()) Fail(Status::NotFound("certificate_unknown", "no such certificate"));
      IssuedCertificate cert = ReadCertificate(s);
      // Signed in the machine's current epoch (kV4Renew); the same read
      // snapshot as the row above.
      Stmt epoch = c.Prepare(
          "SELECT 1 FROM certificates c JOIN machines m ON m.id = c.machine_id "
          "WHERE c.serial = ?1 AND c.attest_epoch = m.attest_epoch");
      epoch.BindText(1, serial);
      cert.since_reset = epoch.Step();
      return cert;
    });
  });
}

Result<Machine> SqlStore::RecordRenewal(const IssuedCertificate& cert, const std::string& replaces,
                                           const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    if (Status s = CheckCertificate(cert); !s.ok()) return s;
    CheckSize("replaces", replaces.size(), 1, 64);
    return db_->Write([&](Connection& c) { return RecordRenewalIn(c, cert, replaces, actor, now); });
  });
}

// --- CSR role: an issued certificate in one transaction (issue 28) -----------

Result<Machine> SqlStore::RecordIssuedCertificate(const IssuedCertificateRecord& record, const Actor& actor,
                                                  int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    if (Status s = CheckCertificate(record.certificate); !s.ok()) return s;
    if (record.replaces) CheckSize("replaces", record.replaces->size(), 1, 64);
    if (record.certify_token_hash &&
        (record.certify_token_hash->empty() || record.certify_token_hash->size() > kMaxHash)) {
      return Status::NotFound("token_unknown", "unknown token");
    }
    return db_->WriteRerunnable([&](Connection& c) {
      // SECURITY: one nonce, one use (docs/csr.md), in the transaction that
      // records the certificate the nonce proved: of two CSRs certified over
      // one nonce exactly one is recorded, and a refused record (the one
      // client certificate, a reset in between) leaves the nonce unused for
      // the corrected request. Checked first, as the core consumed it before
      // it recorded.
      if (record.certify_token_hash) ConsumeCertifyNonceIn(c, *record.certify_token_hash, now);
      return record.replaces ? RecordRenewalIn(c, record.certificate, *record.replaces, actor, now)
                             : RecordFirstIn(c, record.certificate, actor, now);
    });
  });
}

Result<IssuedCertificate> SqlStore::FindClientCertificate(int64_t machine_id, const Bytes& public_key_sha256) {
  return Guard([&]() -> Result<IssuedCertificate> {
    return db_->Read([&](Connection& c) {
      // Only since the mark was set: a reset clears the mark, and
      // certificates from before it are history, not answers.
      Stmt s = c.Prepare(std::string(kCertificateSelect) +
                         "WHERE machine_id = ?1 AND kind = 'client' AND public_key_sha256 = ?2 AND "
                         "issued_at >= (SELECT client_cert_issued_at FROM machines WHERE id = ?1) "
                         "ORDER BY issued_at DESC, rowid DESC LIMIT 1");
      s.BindInt(1, machine_id).BindBlob(2, public_key_sha256);
      if (!s.Step()) Fail(Status::NotFound("certificate_unknown", "no such client certificate"));
      return ReadCertificate(s);
    });
  });
}

Result<std::vector<IssuedCertificate>> SqlStore::ListCertificates(const std::string& hostname, int limit) {
  return Guard([&]() -> Result<std::vector<IssuedCertificate>> {
    return db_->Read([&](Connection& c) {
      Stmt s = c.Prepare(std::string(kCertificateSelect) +
                         "WHERE (?1 = '' OR hostname = ?1) ORDER BY issued_at DESC, rowid DESC LIMIT ?2");
      s.BindText(1, hostname).BindInt(2, std::clamp(limit, 1, 100000));
      std::vector<IssuedCertificate> out;
      while (s.Step()) out.push_back(ReadCertificate(s));
      return out;
    });
  });
}

}  // namespace rackgate::storage
