// The local TPM through tpm2-tss ESYS and the TCTI loader: EK certificates
// from NV, the EK and an AK, ActivateCredential, quotes and PCR reads, and
// the kubelet's TPM-resident key (create, certify, sign). Every transient
// object and session is flushed as soon as its owner goes out of scope:
// swtpm has three object slots and no resource manager.
// Internal to rackgate-agent. Not thread-safe: one Tpm per thread.
#ifndef RACKGATE_AGENT_TPM_H_
#define RACKGATE_AGENT_TPM_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/tpm.h is internal to rackgate-agent"
#endif

#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "agent/templates.h"
#include "attest/credential.h"
#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::agent {

// Largest NV index we read (an EK certificate is 0.8–2 KiB; a chain index a
// few certificates).
inline constexpr size_t kMaxNvBytes = 16 * 1024;

class Tpm;

// The NV side of a TPM, as EK selection reads it (ChooseEk): Tpm is one,
// tests use a fake.
class NvIndexReader {
 public:
  virtual ~NvIndexReader() = default;
  // NV indices defined in [first, last], ascending.
  virtual Result<std::vector<uint32_t>> ListNvIndices(uint32_t first, uint32_t last) = 0;
  // The whole contents of NV index `index`; kInvalidArgument
  // "nv_index_too_large" over `max_bytes`; kTpmError.
  virtual Result<Bytes> ReadNv(uint32_t index, size_t max_bytes = kMaxNvBytes) = 0;
};

// A transient object or session loaded in the TPM. Flushed when destroyed.
// Holds a BORROWED pointer to its Tpm, which must outlive it.
class TpmObject {
 public:
  TpmObject() = default;
  TpmObject(Tpm* tpm, ESYS_TR handle, Bytes tpm2b_public)
      : tpm_(tpm), handle_(handle), public_(std::move(tpm2b_public)) {}
  TpmObject(TpmObject&& other) noexcept { *this = std::move(other); }
  TpmObject& operator=(TpmObject&& other) noexcept;
  TpmObject(const TpmObject&) = delete;
  TpmObject& operator=(const TpmObject&) = delete;
  ~TpmObject() { Flush(); }

  ESYS_TR handle() const { return handle_; }
  bool loaded() const { return handle_ != ESYS_TR_NONE; }
  // The object's TPM2B_PUBLIC, marshalled; empty for sessions.
  const Bytes& tpm2b_public() const { return public_; }
  // Flushes now (idempotent). Errors are ignored: there is nothing a caller
  // could do, and the TPM frees everything on its next reset anyway.
  void Flush();

 private:
  Tpm* tpm_ = nullptr;
  ESYS_TR handle_ = ESYS_TR_NONE;
  Bytes public_;
};

// The EK and what its policy needs.
struct Ek {
  EkKind kind = EkKind::kRsa2048;
  TpmObject object;
};

// A TPM-resident key as tpm2_create -u/-r write it: marshalled TPM2B_PUBLIC
// and TPM2B_PRIVATE (the private part encrypted to its parent).
struct KeyBlobs {
  Bytes tpm2b_public;
  Bytes tpm2b_private;
};

// An AK, loaded, and its blobs (wrapped by the EK that made it) so that a
// later process can load it again under the same EK (LoadAk).
struct Ak {
  TpmObject object;
  KeyBlobs blobs;
};

// TPM2_Quote / TPM2_Certify output: the bare TPMS_ATTEST and the marshalled
// TPMT_SIGNATURE.
struct Attested {
  Bytes attest;
  Bytes signature;
};

class Tpm final : public NvIndexReader {
 public:
  // Loads the TCTI named by `tcti_conf` ("device:/dev/tpmrm0",
  // "swtpm:host=127.0.0.1,port=2321") and initializes ESYS over it.
  // kTpmError "tpm_unavailable" when either fails.
  static Result<std::unique_ptr<Tpm>> Open(const std::string& tcti_conf);
  ~Tpm() override;
  Tpm(const Tpm&) = delete;
  Tpm& operator=(const Tpm&) = delete;

  // NV indices defined in [first, last], ascending.
  Result<std::vector<uint32_t>> ListNvIndices(uint32_t first, uint32_t last) override;
  // The whole contents of NV index `index`, read in chunks of at most the
  // TPM's TPM_PT_NV_BUFFER_MAX. Authorized with the index's own (empty)
  // auth when TPMA_NV_AUTHREAD is set, else with the (empty) owner auth.
  // kInvalidArgument "nv_index_too_large" over `max_bytes`; kTpmError.
  Result<Bytes> ReadNv(uint32_t index, size_t max_bytes = kMaxNvBytes) override;

  // TPM2_CreatePrimary in the endorsement hierarchy from EkTemplate(kind).
  Result<Ek> CreateEk(EkKind kind);
  // A fresh AK under `ek` (AkTemplate(alg)), created and loaded with the
  // EK's policy satisfied, and its blobs.
  Result<Ak> CreateAk(const Ek& ek, AkAlg alg);
  // TPM2_Load of an AK's `blobs` (CreateAk's, in this or an earlier process)
  // under `ek`, the same EK recreated, with the EK's policy satisfied.
  // kTpmError when the TPM refuses them (another TPM's, another EK's);
  // kInvalidArgument when they do not unmarshal.
  Result<TpmObject> LoadAk(const Ek& ek, const KeyBlobs& blobs);
  // TPM2_ActivateCredential: the secret the appliance wrapped for `ek` and
  // the name of `ak`. kTpmError "activation_failed" when the TPM refuses it
  // (a credential made for another TPM or another AK).
  Result<Bytes> ActivateCredential(const TpmObject& ak, const Ek& ek, const attest::Credential& credential);

  // TPM2_Quote by `ak` (its own scheme) over `nonce` and `selection`.
  Result<Attested> Quote(const TpmObject& ak, std::span<const uint8_t> nonce,
                         const std::vector<attest::PcrSelection>& selection);
  // The values of every PCR in `selection`, through as many TPM2_PCR_Read
  // calls as needed (each returns at most 8). kTpmError "pcr_bank_unavailable"
  // when the TPM does not have a selected bank or PCR.
  Result<attest::PcrValues> ReadPcrs(const std::vector<attest::PcrSelection>& selection);

  // TPM2_CreatePrimary in the owner hierarchy from SrkTemplate().
  Result<TpmObject> CreateSrk();
  // TPM2_Create of `tmpl` under `parent` (a storage key with empty auth).
  Result<KeyBlobs> CreateKey(const TpmObject& parent, const TPM2B_PUBLIC& tmpl);
  // TPM2_Load of `blobs` under `parent`.
  Result<TpmObject> LoadKey(const TpmObject& parent, const KeyBlobs& blobs);
  // TPM2_Certify of `key` by `ak` with `qualifying_data`.
  Result<Attested> Certify(const TpmObject& key, const TpmObject& ak, std::span<const uint8_t> qualifying_data);
  // TPM2_Sign of a digest with `key`'s own scheme; the marshalled TPMT_SIGNATURE.
  Result<Bytes> SignDigest(const TpmObject& key, std::span<const uint8_t> digest);

  // For TpmObject only.
  void FlushHandle(ESYS_TR handle);

 private:
  Tpm() = default;
  // A policy session in which the EK's policy is satisfied; good for one use.
  Result<TpmObject> StartEkPolicySession(EkKind kind);
  // TPM2_CreatePrimary of `tmpl` in `hierarchy` (password auth), loaded;
  // `what` names the command in errors.
  Result<TpmObject> CreatePrimaryObject(ESYS_TR hierarchy, const TPM2B_PUBLIC& tmpl, const std::string& what);
  // TPM2_Create of `tmpl` under `parent`, authorized by `auth` (a session or
  // ESYS_TR_PASSWORD): the private and public blobs, not loaded; `what`
  // names the command in errors.
  Result<std::pair<TPM2B_PRIVATE, TPM2B_PUBLIC>> CreateUnder(ESYS_TR parent, ESYS_TR auth, const TPM2B_PUBLIC& tmpl,
                                                            const std::string& what);
  Result<uint16_t> NvBufferMax();

  // Declared first so it is destroyed last: ESYS must be finalized before
  // the TCTI it runs over.
  struct TctiDeleter {
    void operator()(TSS2_TCTI_CONTEXT* t) const { Tss2_TctiLdr_Finalize(&t); }
  };
  struct EsysDeleter {
    void operator()(ESYS_CONTEXT* c) const { Esys_Finalize(&c); }
  };
  std::unique_ptr<TSS2_TCTI_CONTEXT, TctiDeleter> tcti_;
  std::unique_ptr<ESYS_CONTEXT, EsysDeleter> esys_;
};

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_TPM_H_
