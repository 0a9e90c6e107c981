// softtpm-tool: the boot storm's software TPM (attest/testing/soft_tpm.h)
// from the command line, in the file formats tpm2-tools use, so that
// firmware-tests/softtpm_vs_swtpm.sh can hold its bytes against swtpm's.
// It calls exactly what bench/boot-storm calls: SoftKey::EkSpec / AkSpec,
// ActivateCredential, MakeQuoteMessage, Sign, AkQualifiedName.
//
//   softtpm-tool ek --type rsa|ecc|ecc384 --public EK.pub --key EK.pem
//   softtpm-tool ak --type ecc|rsa --public AK.pub --name AK.name --key AK.pem
//   softtpm-tool template FILE.pub           # TPMT_PUBLIC before `unique`, hex; unique sizes
//   softtpm-tool qualified-name --ek-public EK.pub --ak-public AK.pub
//   softtpm-tool activate --ek-key EK.pem --ek-public EK.pub --name AK.name --credential CRED --out SECRET
//   softtpm-tool quote --ak-key AK.pem --ak-public AK.pub --ek-public EK.pub --pcr-list LIST
//                      --pcr-values VALUES --nonce HEX --message OUT.msg --signature OUT.sig
//                      [--clock N] [--reset N] [--restart N] [--firmware HEX]
// VALUES is `tpm2_quote -F values` output: the selected PCRs' digests in
// selection order. Exit 0 ok, 1 refused (activation failed), 2 bad input.
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "attest/credential.h"
#include "attest/quote.h"
#include "attest/testing/soft_tpm.h"
#include "base/hex.h"

namespace {

using namespace rackgate;          // NOLINT
using namespace rackgate::attest;  // NOLINT
using testing::SoftKey;
using testing::SoftKeySpec;

[[noreturn]] void Fail(const std::string& msg, int rc = 2) {
  std::fprintf(stderr, "softtpm-tool: %s\n", msg.c_str());
  std::exit(rc);
}

Bytes Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Fail("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  const std::string t = s.str();
  return Bytes(t.begin(), t.end());
}

void Write(const std::string& path, const Bytes& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!f) Fail("cannot write " + path);
}

void WriteKey(const std::string& path, EVP_PKEY* key) {
  BIO* b = BIO_new_file(path.c_str(), "w");
  if (b == nullptr || PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    Fail("cannot write " + path);
  }
  BIO_free(b);
}

EVP_PKEY* ReadKey(const std::string& path) {
  BIO* b = BIO_new_file(path.c_str(), "r");
  EVP_PKEY* k = b ? PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(b);
  if (k == nullptr) Fail("cannot read a private key from " + path);
  return k;
}

TpmPublic ReadPublic(const std::string& path) {
  auto p = ParseTpm2bPublic(Read(path));
  if (!p.ok()) Fail(path + ": " + p.status().ToString());
  return std::move(p).value();
}

// The spec a parsed public area was made with, so that a key pair read back
// from PEM gives a SoftKey with exactly that public area.
SoftKeySpec SpecOf(const TpmPublic& p) {
  SoftKeySpec s;
  s.type = p.type;
  s.rsa_bits = p.rsa_key_bits;
  s.curve = p.ecc_curve;
  s.name_alg = p.name_alg;
  s.scheme = p.scheme;
  s.scheme_hash = p.scheme_hash;
  s.attributes = p.attributes;
  s.symmetric_bits = p.symmetric_alg == kAlgAes ? p.symmetric_key_bits : 0;
  s.auth_policy = p.auth_policy;
  return s;
}

SoftKey Load(const std::string& key_path, const std::string& pub_path) {
  const Bytes want = Read(pub_path);
  SoftKey k = SoftKey::FromKey(ReadKey(key_path), SpecOf(ReadPublic(pub_path)));
  if (k.tpm2b_public() != want) Fail(key_path + " and " + pub_path + " do not make the same public area");
  return k;
}

std::string Hex(std::span<const uint8_t> b) { return hex::Encode(b); }

Bytes Unhex(const std::string& s) {
  if (s.size() % 2) Fail("odd hex");
  Bytes out;
  for (size_t i = 0; i < s.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

std::map<std::string, std::string> Flags(int argc, char** argv, int first) {
  std::map<std::string, std::string> f;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= argc) Fail("bad argument " + a);
    f[a.substr(2)] = argv[++i];
  }
  return f;
}

std::string Need(const std::map<std::string, std::string>& f, const char* k) {
  auto it = f.find(k);
  if (it == f.end()) Fail(std::string("--") + k + " is required");
  return it->second;
}

int Ek(const std::map<std::string, std::string>& f) {
  const std::string t = Need(f, "type");
  if (t != "rsa" && t != "ecc" && t != "ecc384") Fail("--type rsa|ecc|ecc384");
  SoftKey k = SoftKey::GenerateEk(t == "rsa" ? kAlgRsa : kAlgEcc, t == "ecc384" ? kEccNistP384 : kEccNistP256);
  Write(Need(f, "public"), k.tpm2b_public());
  WriteKey(Need(f, "key"), k.pkey());
  return 0;
}

int Ak(const std::map<std::string, std::string>& f) {
  const std::string t = Need(f, "type");
  if (t != "rsa" && t != "ecc") Fail("--type ecc|rsa");
  SoftKey k = SoftKey::GenerateAk(t == "rsa" ? kAlgRsa : kAlgEcc);
  Write(Need(f, "public"), k.tpm2b_public());
  Write(Need(f, "name"), k.name());
  WriteKey(Need(f, "key"), k.pkey());
  return 0;
}

// The marshalled TPMT_PUBLIC up to its last field, `unique` (the key), which
// differs between any two keys; then the unique field's sizes.
int Template(const std::string& path) {
  const TpmPublic p = ReadPublic(path);
  size_t unique = 0;
  std::string sizes;
  if (p.type == kAlgRsa) {
    unique = 2 + p.rsa_modulus.size();
    sizes = "rsa=" + std::to_string(p.rsa_modulus.size());
  } else {
    unique = 2 + p.ecc_x.size() + 2 + p.ecc_y.size();
    sizes = "x=" + std::to_string(p.ecc_x.size()) + " y=" + std::to_string(p.ecc_y.size());
  }
  if (unique > p.marshalled.size()) Fail("unique larger than the public area");
  std::printf("template=%s\nunique %s\n",
              Hex(std::span<const uint8_t>(p.marshalled.data(), p.marshalled.size() - unique)).c_str(),
              sizes.c_str());
  return 0;
}

Bytes AkQn(const std::string& ek_pub, const std::string& ak_pub) {
  const TpmPublic ek = ReadPublic(ek_pub);
  const TpmPublic ak = ReadPublic(ak_pub);
  const Bytes ek_qn =
      testing::QualifiedName(ek.name_alg, testing::HierarchyQualifiedName(testing::kRhEndorsement), ObjectName(ek));
  return testing::QualifiedName(ak.name_alg, ek_qn, ObjectName(ak));
}

int Activate(const std::map<std::string, std::string>& f) {
  SoftKey ek = Load(Need(f, "ek-key"), Need(f, "ek-public"));
  auto cred = DecodeCredentialFile(Read(Need(f, "credential")));
  if (!cred.ok()) Fail(cred.status().ToString());
  auto secret = ek.ActivateCredential(*cred, Read(Need(f, "name")));
  if (!secret) Fail("ActivateCredential: the integrity check failed", 1);
  Write(Need(f, "out"), *secret);
  return 0;
}

int Quote(const std::map<std::string, std::string>& f) {
  SoftKey ak = Load(Need(f, "ak-key"), Need(f, "ak-public"));
  auto sel = ParsePcrSelectionList(Need(f, "pcr-list"));
  if (!sel.ok()) Fail(sel.status().ToString());
  const Bytes values = Read(Need(f, "pcr-values"));
  PcrValues pcrs;
  size_t off = 0;
  for (const auto& s : *sel) {
    const size_t n = DigestSize(s.hash_alg);
    for (uint32_t i : s.pcrs) {
      if (off + n > values.size()) Fail("too few PCR values");
      pcrs[s.hash_alg][i] = Bytes(values.begin() + static_cast<long>(off), values.begin() + static_cast<long>(off + n));
      off += n;
    }
  }
  if (off != values.size()) Fail("more PCR values than selected");
  testing::SoftQuoteSpec q;
  q.selection = *sel;
  q.hash_alg = kAlgSha256;
  auto num = [&](const char* k, uint64_t d) { return f.count(k) ? std::stoull(f.at(k), nullptr, 0) : d; };
  q.clock = ClockInfo{num("clock", 1000), static_cast<uint32_t>(num("reset", 1)),
                      static_cast<uint32_t>(num("restart", 0)), true};
  q.firmware_version = f.count("firmware") ? std::stoull(f.at("firmware"), nullptr, 16) : q.firmware_version;
  q.qualified_signer = AkQn(Need(f, "ek-public"), Need(f, "ak-public"));
  const Bytes msg = testing::MakeQuoteMessage(q, pcrs, Unhex(Need(f, "nonce")));
  Write(Need(f, "message"), msg);
  Write(Need(f, "signature"), ak.Sign(msg));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Fail("usage: softtpm-tool ek|ak|template|qualified-name|activate|quote ...");
  const std::string cmd = argv[1];
  try {
    if (cmd == "template" && argc == 3) return Template(argv[2]);
    auto f = Flags(argc, argv, 2);
    if (cmd == "ek") return Ek(f);
    if (cmd == "ak") return Ak(f);
    if (cmd == "qualified-name") {
      std::printf("%s\n", Hex(AkQn(Need(f, "ek-public"), Need(f, "ak-public"))).c_str());
      return 0;
    }
    if (cmd == "activate") return Activate(f);
    if (cmd == "quote") return Quote(f);
  } catch (const std::exception& e) {
    Fail(e.what());
  }
  Fail("unknown command " + cmd);
}
