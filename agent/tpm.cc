// ESYS calls behind Tpm. Every ESYS output is freed with Esys_Free (through
// EsysPtr); every transient handle is owned by a TpmObject.
#include "agent/tpm.h"

#include <openssl/crypto.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

namespace rackgate::agent {

namespace {

struct EsysFree {
  void operator()(void* p) const { Esys_Free(p); }
};
template <typename T>
using EsysPtr = std::unique_ptr<T, EsysFree>;

std::string HandleName(uint32_t handle) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", handle);
  return buf;
}

Status TpmFailure(const std::string& what, TSS2_RC rc, const char* reason = "tpm_command_failed") {
  return Status::TpmError(reason, what + ": " + Tss2_RC_Decode(rc));
}

// Marshals a TPM2B_PUBLIC / TPM2B_PRIVATE / TPMT_SIGNATURE with tss2-mu.
template <typename T, TSS2_RC (*Marshal)(const T*, uint8_t*, size_t, size_t*)>
Bytes MarshalWith(const T& v) {
  Bytes out(sizeof(T) + 16);
  size_t offset = 0;
  const TSS2_RC rc = Marshal(&v, out.data(), out.size(), &offset);
  if (rc != TSS2_RC_SUCCESS) throw std::runtime_error(std::string("marshal: ") + Tss2_RC_Decode(rc));
  out.resize(offset);
  return out;
}

Bytes MarshalPublic(const TPM2B_PUBLIC& p) {
  return MarshalWith<TPM2B_PUBLIC, Tss2_MU_TPM2B_PUBLIC_Marshal>(p);
}

template <typename T, TSS2_RC (*Unmarshal)(const uint8_t*, size_t, size_t*, T*)>
Result<T> UnmarshalExactly(std::span<const uint8_t> data, const char* what) {
  T v;
  std::memset(&v, 0, sizeof(v));
  size_t offset = 0;
  if (Unmarshal(data.data(), data.size(), &offset, &v) != TSS2_RC_SUCCESS || offset != data.size()) {
    return Status::InvalidArgument("key_blob_malformed", std::string(what) + " does not parse");
  }
  return v;
}

TPML_PCR_SELECTION ToTpml(const std::vector<attest::PcrSelection>& selection) {
  TPML_PCR_SELECTION out;
  std::memset(&out, 0, sizeof(out));
  for (const auto& bank : selection) {
    if (out.count >= TPM2_NUM_PCR_BANKS) throw std::invalid_argument("too many PCR banks");
    TPMS_PCR_SELECTION& s = out.pcrSelections[out.count++];
    s.hash = bank.hash_alg;
    s.sizeofSelect = 3;  // PCRs 0..23
    for (uint32_t pcr : bank.pcrs) {
      if (pcr >= 24) throw std::invalid_argument("PCR index above 23");
      s.pcrSelect[pcr / 8] |= static_cast<uint8_t>(1u << (pcr % 8));
    }
  }
  return out;
}

void CopyTo(std::span<const uint8_t> in, uint8_t* buffer, size_t capacity, UINT16* size) {
  if (in.size() > capacity) throw std::invalid_argument("TPM2B input too large");
  std::memcpy(buffer, in.data(), in.size());
  *size = static_cast<UINT16>(in.size());
}

// What TPM2_Create and TPM2_CreatePrimary take and rackgate leaves empty: no
// sensitive data or auth value, no outside info, no creation PCRs.
struct NoCreationInputs {
  TPM2B_SENSITIVE_CREATE sensitive{};
  TPM2B_DATA outside{};
  TPML_PCR_SELECTION pcrs{};
};

}  // namespace

TpmObject& TpmObject::operator=(TpmObject&& other) noexcept {
  if (this != &other) {
    Flush();
    tpm_ = other.tpm_;
    handle_ = other.handle_;
    public_ = std::move(other.public_);
    other.tpm_ = nullptr;
    other.handle_ = ESYS_TR_NONE;
  }
  return *this;
}

void TpmObject::Flush() {
  if (tpm_ != nullptr && handle_ != ESYS_TR_NONE) tpm_->FlushHandle(handle_);
  handle_ = ESYS_TR_NONE;
}

Result<std::unique_ptr<Tpm>> Tpm::Open(const std::string& tcti_conf) {
  std::unique_ptr<Tpm> tpm(new Tpm());
  TSS2_TCTI_CONTEXT* tcti = nullptr;
  TSS2_RC rc = Tss2_TctiLdr_Initialize(tcti_conf.c_str(), &tcti);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TCTI " + tcti_conf, rc, "tpm_unavailable");
  tpm->tcti_.reset(tcti);
  ESYS_CONTEXT* esys = nullptr;
  rc = Esys_Initialize(&esys, tcti, nullptr);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("Esys_Initialize", rc, "tpm_unavailable");
  tpm->esys_.reset(esys);
  return tpm;
}

Tpm::~Tpm() = default;

void Tpm::FlushHandle(ESYS_TR handle) { (void)Esys_FlushContext(esys_.get(), handle); }

Result<std::vector<uint32_t>> Tpm::ListNvIndices(uint32_t first, uint32_t last) {
  std::vector<uint32_t> out;
  uint32_t next = first;
  for (int round = 0; round < 64 && next <= last; ++round) {
    TPMI_YES_NO more = TPM2_NO;
    TPMS_CAPABILITY_DATA* raw = nullptr;
    const TSS2_RC rc = Esys_GetCapability(esys_.get(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                          TPM2_CAP_HANDLES, next, TPM2_MAX_CAP_HANDLES, &more, &raw);
    EsysPtr<TPMS_CAPABILITY_DATA> data(raw);
    if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_GetCapability(handles)", rc);
    const TPML_HANDLE& list = data->data.handles;
    if (list.count == 0) break;
    for (uint32_t i = 0; i < list.count && i < TPM2_MAX_CAP_HANDLES; ++i) {
      if (list.handle[i] < next || list.handle[i] > last) {
        next = last + 1;  // past the range (or not advancing): done
        break;
      }
      out.push_back(list.handle[i]);
      next = list.handle[i] + 1;
    }
    if (!more) break;
  }
  return out;
}

Result<uint16_t> Tpm::NvBufferMax() {
  TPMI_YES_NO more = TPM2_NO;
  TPMS_CAPABILITY_DATA* raw = nullptr;
  const TSS2_RC rc = Esys_GetCapability(esys_.get(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                        TPM2_CAP_TPM_PROPERTIES, TPM2_PT_NV_BUFFER_MAX, 1, &more, &raw);
  EsysPtr<TPMS_CAPABILITY_DATA> data(raw);
  // 512 is what every TPM 2.0 supports; use it when the TPM does not say.
  uint32_t max = 512;
  if (rc == TSS2_RC_SUCCESS && data->data.tpmProperties.count == 1 &&
      data->data.tpmProperties.tpmProperty[0].property == TPM2_PT_NV_BUFFER_MAX) {
    max = data->data.tpmProperties.tpmProperty[0].value;
  }
  return static_cast<uint16_t>(std::clamp<uint32_t>(max, 64, TPM2_MAX_NV_BUFFER_SIZE));
}

Result<Bytes> Tpm::ReadNv(uint32_t index, size_t max_bytes) {
  ESYS_TR nv = ESYS_TR_NONE;
  TSS2_RC rc = Esys_TR_FromTPMPublic(esys_.get(), index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("NV index " + HandleName(index), rc);
  // An NV index is not flushed, only forgotten by ESYS.
  struct Closer {
    ESYS_CONTEXT* ctx;
    ESYS_TR* tr;
    ~Closer() { (void)Esys_TR_Close(ctx, tr); }
  } closer{esys_.get(), &nv};

  TPM2B_NV_PUBLIC* pub_raw = nullptr;
  TPM2B_NAME* name_raw = nullptr;
  rc = Esys_NV_ReadPublic(esys_.get(), nv, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub_raw, &name_raw);
  EsysPtr<TPM2B_NV_PUBLIC> pub(pub_raw);
  EsysPtr<TPM2B_NAME> name(name_raw);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_NV_ReadPublic", rc);
  const size_t size = pub->nvPublic.dataSize;
  if (size > max_bytes) {
    return Status::InvalidArgument("nv_index_too_large", "NV index holds " + std::to_string(size) + " bytes");
  }
  // TCG EK profile indices allow reading with their own empty auth; a
  // machine whose owner set an owner password can still be read that way.
  const ESYS_TR auth = (pub->nvPublic.attributes & TPMA_NV_AUTHREAD) ? nv : ESYS_TR_RH_OWNER;

  auto chunk = NvBufferMax();
  if (!chunk.ok()) return chunk.status();
  Bytes out;
  out.reserve(size);
  while (out.size() < size) {
    const auto n = static_cast<UINT16>(std::min<size_t>(*chunk, size - out.size()));
    TPM2B_MAX_NV_BUFFER* raw = nullptr;
    rc = Esys_NV_Read(esys_.get(), auth, nv, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, n,
                      static_cast<UINT16>(out.size()), &raw);
    EsysPtr<TPM2B_MAX_NV_BUFFER> data(raw);
    if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_NV_Read", rc);
    // A TPM that returns less than asked would leave us looping or
    // misaligned: refuse rather than guess.
    if (data->size != n) return Status::TpmError("tpm_short_read", "TPM2_NV_Read returned a short buffer");
    out.insert(out.end(), data->buffer, data->buffer + data->size);
  }
  return out;
}

Result<TpmObject> Tpm::StartEkPolicySession(EkKind kind) {
  const TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_NULL, .keyBits = {.aes = 0}, .mode = {.aes = 0}};
  ESYS_TR session = ESYS_TR_NONE;
  TSS2_RC rc = Esys_StartAuthSession(esys_.get(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                     ESYS_TR_NONE, nullptr, TPM2_SE_POLICY, &symmetric, EkPolicyHash(kind),
                                     &session);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_StartAuthSession", rc);
  TpmObject owned(this, session, {});
  TPM2B_TIMEOUT* timeout = nullptr;
  TPMT_TK_AUTH* ticket = nullptr;
  rc = Esys_PolicySecret(esys_.get(), ESYS_TR_RH_ENDORSEMENT, session, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                         ESYS_TR_NONE, nullptr, nullptr, nullptr, 0, &timeout, &ticket);
  EsysPtr<TPM2B_TIMEOUT> t1(timeout);
  EsysPtr<TPMT_TK_AUTH> t2(ticket);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_PolicySecret(endorsement)", rc);
  const std::vector<Bytes> branches = EkPolicyOrBranches(kind);
  if (!branches.empty()) {
    TPML_DIGEST list;
    std::memset(&list, 0, sizeof(list));
    for (const Bytes& b : branches) {
      TPM2B_DIGEST& d = list.digests[list.count++];
      CopyTo(b, d.buffer, sizeof(d.buffer), &d.size);
    }
    rc = Esys_PolicyOR(esys_.get(), session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &list);
    if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_PolicyOR", rc);
  }
  return owned;
}

Result<TpmObject> Tpm::CreatePrimaryObject(ESYS_TR hierarchy, const TPM2B_PUBLIC& tmpl, const std::string& what) {
  const NoCreationInputs in;
  ESYS_TR handle = ESYS_TR_NONE;
  TPM2B_PUBLIC* pub_raw = nullptr;
  TPM2B_CREATION_DATA* cd = nullptr;
  TPM2B_DIGEST* ch = nullptr;
  TPMT_TK_CREATION* ct = nullptr;
  const TSS2_RC rc = Esys_CreatePrimary(esys_.get(), hierarchy, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                        &in.sensitive, &tmpl, &in.outside, &in.pcrs, &handle, &pub_raw, &cd, &ch, &ct);
  EsysPtr<TPM2B_PUBLIC> pub(pub_raw);
  EsysPtr<TPM2B_CREATION_DATA> f1(cd);
  EsysPtr<TPM2B_DIGEST> f2(ch);
  EsysPtr<TPMT_TK_CREATION> f3(ct);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure(what, rc);
  return TpmObject(this, handle, MarshalPublic(*pub));
}

Result<std::pair<TPM2B_PRIVATE, TPM2B_PUBLIC>> Tpm::CreateUnder(ESYS_TR parent, ESYS_TR auth,
                                                              const TPM2B_PUBLIC& tmpl, const std::string& what) {
  const NoCreationInputs in;
  TPM2B_PRIVATE* priv_raw = nullptr;
  TPM2B_PUBLIC* pub_raw = nullptr;
  TPM2B_CREATION_DATA* cd = nullptr;
  TPM2B_DIGEST* ch = nullptr;
  TPMT_TK_CREATION* ct = nullptr;
  const TSS2_RC rc = Esys_Create(esys_.get(), parent, auth, ESYS_TR_NONE, ESYS_TR_NONE, &in.sensitive, &tmpl,
                                 &in.outside, &in.pcrs, &priv_raw, &pub_raw, &cd, &ch, &ct);
  EsysPtr<TPM2B_PRIVATE> priv(priv_raw);
  EsysPtr<TPM2B_PUBLIC> pub(pub_raw);
  EsysPtr<TPM2B_CREATION_DATA> f1(cd);
  EsysPtr<TPM2B_DIGEST> f2(ch);
  EsysPtr<TPMT_TK_CREATION> f3(ct);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure(what, rc);
  return std::make_pair(*priv, *pub);
}

Result<Ek> Tpm::CreateEk(EkKind kind) {
  auto object = CreatePrimaryObject(ESYS_TR_RH_ENDORSEMENT, EkTemplate(kind),
                                    "TPM2_CreatePrimary(EK " + EkKindName(kind) + ")");
  if (!object.ok()) return object.status();
  Ek ek;
  ek.kind = kind;
  ek.object = std::move(object).value();
  return ek;
}

Result<Ak> Tpm::CreateAk(const Ek& ek, AkAlg alg) {
  KeyBlobs blobs;
  {
    // A policy session authorizes one command: one for Create, one for Load.
    auto session = StartEkPolicySession(ek.kind);
    if (!session.ok()) return session.status();
    auto created = CreateUnder(ek.object.handle(), session->handle(), AkTemplate(alg), "TPM2_Create(AK)");
    if (!created.ok()) return created.status();
    blobs.tpm2b_public = MarshalPublic(created->second);
    blobs.tpm2b_private = MarshalWith<TPM2B_PRIVATE, Tss2_MU_TPM2B_PRIVATE_Marshal>(created->first);
  }
  auto object = LoadAk(ek, blobs);
  if (!object.ok()) return object.status();
  return Ak{std::move(object).value(), std::move(blobs)};
}

Result<TpmObject> Tpm::LoadAk(const Ek& ek, const KeyBlobs& blobs) {
  auto pub = UnmarshalExactly<TPM2B_PUBLIC, Tss2_MU_TPM2B_PUBLIC_Unmarshal>(blobs.tpm2b_public, "TPM2B_PUBLIC");
  if (!pub.ok()) return pub.status();
  auto priv =
      UnmarshalExactly<TPM2B_PRIVATE, Tss2_MU_TPM2B_PRIVATE_Unmarshal>(blobs.tpm2b_private, "TPM2B_PRIVATE");
  if (!priv.ok()) return priv.status();
  // The EK is a restricted decryption key with a policy (TCG EK profile):
  // loading under it needs the same policy session as ActivateCredential.
  auto session = StartEkPolicySession(ek.kind);
  if (!session.ok()) return session.status();
  ESYS_TR handle = ESYS_TR_NONE;
  const TSS2_RC rc = Esys_Load(esys_.get(), ek.object.handle(), session->handle(), ESYS_TR_NONE, ESYS_TR_NONE,
                               &*priv, &*pub, &handle);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_Load(AK)", rc);
  return TpmObject(this, handle, blobs.tpm2b_public);
}

Result<Bytes> Tpm::ActivateCredential(const TpmObject& ak, const Ek& ek, const attest::Credential& credential) {
  TPM2B_ID_OBJECT id;
  std::memset(&id, 0, sizeof(id));
  TPM2B_ENCRYPTED_SECRET secret;
  std::memset(&secret, 0, sizeof(secret));
  if (credential.id_object.size() > sizeof(id.credential) ||
      credential.encrypted_secret.size() > sizeof(secret.secret)) {
    return Status::InvalidArgument("credential_malformed", "credential larger than the TPM structures");
  }
  CopyTo(credential.id_object, id.credential, sizeof(id.credential), &id.size);
  CopyTo(credential.encrypted_secret, secret.secret, sizeof(secret.secret), &secret.size);
  auto session = StartEkPolicySession(ek.kind);
  if (!session.ok()) return session.status();
  TPM2B_DIGEST* raw = nullptr;
  // The AK (activateHandle) with its empty password, the EK (keyHandle)
  // with its policy.
  const TSS2_RC rc = Esys_ActivateCredential(esys_.get(), ak.handle(), ek.object.handle(), ESYS_TR_PASSWORD,
                                             session->handle(), ESYS_TR_NONE, &id, &secret, &raw);
  EsysPtr<TPM2B_DIGEST> out(raw);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_ActivateCredential", rc, "activation_failed");
  Bytes result(out->buffer, out->buffer + out->size);
  // The recovered secret is a credential: do not leave a copy in ESYS's
  // freed memory.
  OPENSSL_cleanse(out->buffer, sizeof(out->buffer));
  return result;
}

Result<Attested> Tpm::Quote(const TpmObject& ak, std::span<const uint8_t> nonce,
                            const std::vector<attest::PcrSelection>& selection) {
  TPM2B_DATA qualifying;
  std::memset(&qualifying, 0, sizeof(qualifying));
  if (nonce.size() > sizeof(qualifying.buffer)) {
    return Status::InvalidArgument("nonce_too_long", "nonce longer than a TPM2B_DATA");
  }
  CopyTo(nonce, qualifying.buffer, sizeof(qualifying.buffer), &qualifying.size);
  const TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_NULL, .details = {}};
  const TPML_PCR_SELECTION sel = ToTpml(selection);
  TPM2B_ATTEST* quoted_raw = nullptr;
  TPMT_SIGNATURE* sig_raw = nullptr;
  const TSS2_RC rc = Esys_Quote(esys_.get(), ak.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                &qualifying, &scheme, &sel, &quoted_raw, &sig_raw);
  EsysPtr<TPM2B_ATTEST> quoted(quoted_raw);
  EsysPtr<TPMT_SIGNATURE> sig(sig_raw);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_Quote", rc);
  Attested out;
  out.attest.assign(quoted->attestationData, quoted->attestationData + quoted->size);
  out.signature = MarshalWith<TPMT_SIGNATURE, Tss2_MU_TPMT_SIGNATURE_Marshal>(*sig);
  return out;
}

Result<attest::PcrValues> Tpm::ReadPcrs(const std::vector<attest::PcrSelection>& selection) {
  std::map<uint16_t, std::set<uint32_t>> wanted;
  for (const auto& bank : selection) wanted[bank.hash_alg].insert(bank.pcrs.begin(), bank.pcrs.end());
  attest::PcrValues out;
  // Each call returns at most 8 digests (TPML_DIGEST); ask again for what
  // is left until nothing is, and stop if the TPM makes no progress.
  for (int round = 0; round < 64; ++round) {
    std::vector<attest::PcrSelection> left;
    for (const auto& [alg, pcrs] : wanted) {
      if (!pcrs.empty()) left.push_back({alg, std::vector<uint32_t>(pcrs.begin(), pcrs.end())});
    }
    if (left.empty()) return out;
    const TPML_PCR_SELECTION in = ToTpml(left);
    UINT32 update_counter = 0;
    TPML_PCR_SELECTION* sel_raw = nullptr;
    TPML_DIGEST* values_raw = nullptr;
    const TSS2_RC rc = Esys_PCR_Read(esys_.get(), ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &in,
                                     &update_counter, &sel_raw, &values_raw);
    EsysPtr<TPML_PCR_SELECTION> got(sel_raw);
    EsysPtr<TPML_DIGEST> values(values_raw);
    if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_PCR_Read", rc);
    // The values come in the order of the returned selection: banks in
    // order, PCRs ascending within a bank.
    uint32_t v = 0;
    bool progress = false;
    for (uint32_t b = 0; b < got->count && b < TPM2_NUM_PCR_BANKS; ++b) {
      const TPMS_PCR_SELECTION& s = got->pcrSelections[b];
      for (uint32_t pcr = 0; pcr < 8u * std::min<uint32_t>(s.sizeofSelect, TPM2_PCR_SELECT_MAX); ++pcr) {
        if (!(s.pcrSelect[pcr / 8] & (1u << (pcr % 8)))) continue;
        if (v >= values->count || v >= 8) {
          return Status::TpmError("tpm_bad_answer", "TPM2_PCR_Read returned fewer values than it selected");
        }
        const TPM2B_DIGEST& d = values->digests[v++];
        if (d.size != attest::DigestSize(s.hash) || !wanted[s.hash].count(pcr)) {
          return Status::TpmError("tpm_bad_answer", "TPM2_PCR_Read returned an unexpected value");
        }
        out[s.hash][pcr] = Bytes(d.buffer, d.buffer + d.size);
        wanted[s.hash].erase(pcr);
        progress = true;
      }
    }
    if (!progress) {
      return Status::TpmError("pcr_bank_unavailable", "the TPM has no values for " +
                                                          attest::FormatPcrSelectionList(left) +
                                                          " (bank not active?)");
    }
  }
  return Status::TpmError("tpm_bad_answer", "TPM2_PCR_Read did not finish");
}

Result<TpmObject> Tpm::CreateSrk() { return CreatePrimaryObject(ESYS_TR_RH_OWNER, SrkTemplate(), "TPM2_CreatePrimary(SRK)"); }

Result<KeyBlobs> Tpm::CreateKey(const TpmObject& parent, const TPM2B_PUBLIC& tmpl) {
  auto created = CreateUnder(parent.handle(), ESYS_TR_PASSWORD, tmpl, "TPM2_Create");
  if (!created.ok()) return created.status();
  KeyBlobs out;
  out.tpm2b_public = MarshalPublic(created->second);
  out.tpm2b_private = MarshalWith<TPM2B_PRIVATE, Tss2_MU_TPM2B_PRIVATE_Marshal>(created->first);
  return out;
}

Result<TpmObject> Tpm::LoadKey(const TpmObject& parent, const KeyBlobs& blobs) {
  auto pub = UnmarshalExactly<TPM2B_PUBLIC, Tss2_MU_TPM2B_PUBLIC_Unmarshal>(blobs.tpm2b_public, "TPM2B_PUBLIC");
  if (!pub.ok()) return pub.status();
  auto priv =
      UnmarshalExactly<TPM2B_PRIVATE, Tss2_MU_TPM2B_PRIVATE_Unmarshal>(blobs.tpm2b_private, "TPM2B_PRIVATE");
  if (!priv.ok()) return priv.status();
  ESYS_TR handle = ESYS_TR_NONE;
  const TSS2_RC rc = Esys_Load(esys_.get(), parent.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                               &*priv, &*pub, &handle);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_Load", rc);
  return TpmObject(this, handle, blobs.tpm2b_public);
}

Result<Attested> Tpm::Certify(const TpmObject& key, const TpmObject& ak, std::span<const uint8_t> qualifying_data) {
  TPM2B_DATA qualifying;
  std::memset(&qualifying, 0, sizeof(qualifying));
  if (qualifying_data.size() > sizeof(qualifying.buffer)) {
    return Status::InvalidArgument("nonce_too_long", "qualifying data longer than a TPM2B_DATA");
  }
  CopyTo(qualifying_data, qualifying.buffer, sizeof(qualifying.buffer), &qualifying.size);
  const TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_NULL, .details = {}};
  TPM2B_ATTEST* info_raw = nullptr;
  TPMT_SIGNATURE* sig_raw = nullptr;
  const TSS2_RC rc = Esys_Certify(esys_.get(), key.handle(), ak.handle(), ESYS_TR_PASSWORD, ESYS_TR_PASSWORD,
                                  ESYS_TR_NONE, &qualifying, &scheme, &info_raw, &sig_raw);
  EsysPtr<TPM2B_ATTEST> info(info_raw);
  EsysPtr<TPMT_SIGNATURE> sig(sig_raw);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_Certify", rc);
  Attested out;
  out.attest.assign(info->attestationData, info->attestationData + info->size);
  out.signature = MarshalWith<TPMT_SIGNATURE, Tss2_MU_TPMT_SIGNATURE_Marshal>(*sig);
  return out;
}

Result<Bytes> Tpm::SignDigest(const TpmObject& key, std::span<const uint8_t> digest) {
  TPM2B_DIGEST d;
  std::memset(&d, 0, sizeof(d));
  if (digest.size() > sizeof(d.buffer)) return Status::InvalidArgument("digest_too_long", "digest too long");
  CopyTo(digest, d.buffer, sizeof(d.buffer), &d.size);
  const TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_NULL, .details = {}};
  // An unrestricted key signs any digest: the validation ticket is the
  // NULL ticket.
  TPMT_TK_HASHCHECK validation;
  std::memset(&validation, 0, sizeof(validation));
  validation.tag = TPM2_ST_HASHCHECK;
  validation.hierarchy = TPM2_RH_NULL;
  TPMT_SIGNATURE* sig_raw = nullptr;
  const TSS2_RC rc = Esys_Sign(esys_.get(), key.handle(), ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &d,
                               &scheme, &validation, &sig_raw);
  EsysPtr<TPMT_SIGNATURE> sig(sig_raw);
  if (rc != TSS2_RC_SUCCESS) return TpmFailure("TPM2_Sign", rc);
  return MarshalWith<TPMT_SIGNATURE, Tss2_MU_TPMT_SIGNATURE_Marshal>(*sig);
}

}  // namespace rackgate::agent
