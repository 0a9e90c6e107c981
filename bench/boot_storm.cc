// boot-storm: a fleet of simulated machines booting at once against a real
// rackgated over HTTPS on loopback. Each machine has a software TPM
// (attest/testing/soft_tpm.h: EK and AK in OpenSSL, ActivateCredential and
// quotes producing the bytes a TPM produces) and runs the whole node path:
//   1. POST /v1/attest/challenge   (EK public, EK certificate, AK public)
//   2. ActivateCredential + quote, POST /v1/attest/evidence  -> token
//   3. GET /v1/machine/config      (the attested Ignition config)
//   4. POST /v1/machine/csr        (kubelet client CSR, ECDSA P-256)
// C machines are in flight at once, driven by one libcurl multi loop and one
// thread doing the TPMs' work. Each machine opens a TLS connection of its own
// and keeps it for its four steps, as rackgate-agent does (--share-connections:
// connections pooled across machines instead). A
// 503/429 with Retry-After is waited out without blocking anyone else, and
// the machine tries again (from the challenge for the attestation steps); it
// fails only at the overall deadline or on a final refusal.
//
// The ceiling: the appliance's own cryptography per machine, measured with
// OpenSSL in the same run (docs/performance.md, "boot-storm"), and the cost
// ratio: that cryptography (with the CSR check and one TLS handshake's public-key
// work) over rackgated's own CPU per joined machine. With --bundle-bytes, a
// phase before the storm: every machine fetches the agent bundle
// (GET /v1/agent/initramfs), C at a time. Last line:
//   boot-storm: machines=N ok=N failed=F rate=R/s p50=Xms p99=Yms ceiling=C/s ratio=Z peak_rss=M MiB
//     rackgated_cpu_per_machine=Xms essential_crypto_per_machine=Yms cost_ratio=Z rackgated_p99_le=Xms
//     [bundle_mib=X bundle_ok=N bundle_rate=R/s bundle_p99=Xms bundle_rss_growth=Y MiB]
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "attest/credential.h"
#include "attest/eventlog.h"
#include "attest/quote.h"
#include "attest/testing/soft_tpm.h"
#include "base/text.h"
#include "bench/storm_pki.h"
#include "core/secrets.h"
#include "wire/codec.h"
#include "wire/protocol.h"
#include "wire/refusal.h"

extern char** environ;

namespace rackgate::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr char kUsage[] =
    "Usage: boot-storm --machines N --concurrency C\n"
    "                  (--rackgated PATH --rackgatectl PATH\n"
    "                   | --url URL[,URL...] --ca FILE --rackgatectl PATH --socket ADMIN_SOCKET --ek-ca-dir DIR\n"
    "                     [--pid PID[,PID...]])\n"
    "                  [--appliances N] [--database URL | --database-env VAR] [--reference-sqlite]\n"
    "                  [--ek rsa|ecc|ecc384] [--ak ecc|rsa] [--eventlog FILE] [--deadline SECONDS]\n"
    "                  [--threads N] [--client-threads N] [--cores N] [--pool NAME] [--set KEY=JSON] [--keep] [--workdir DIR]\n"
    "                  [--share-connections] [--max-cpu-over-crypto X] [--bundle-bytes N]\n"
    "\n"
    "A boot storm: N simulated machines with software TPMs, C at a time, each running\n"
    "challenge, evidence, attested config and kubelet client CSR against rackgated.\n"
    "\n"
    "With --rackgated/--rackgatectl the benchmark sets everything up itself in a temp\n"
    "dir: `rackgatectl init`, a lab EK CA (root + intermediate) the config trusts,\n"
    "`rackgatectl ca generate --cluster`, a pool with public and attested templates,\n"
    "one `rackgatectl import` of all N machines, and rackgated with raised limits and\n"
    "log_level warn (rackgated's own thread settings unless --threads).\n"
    "With --url, an appliance already runs: the EK CA lives in --ek-ca-dir (made there\n"
    "on the first run, which then stops so that an operator can add DIR/root.pem to\n"
    "ek_roots and DIR/intermediate.pem to ek_intermediates); machines are enrolled\n"
    "through --socket with fresh hostnames; --pid names the daemon for its peak RSS.\n"
    "\n"
    "  --appliances  N rackgated on one --database (managed: started here, each on its\n"
    "              own port, the state copied from the first): machine i starts on\n"
    "              appliance i mod N and, as rackgate-agent, moves to the next one on\n"
    "              a connection error or a 5xx. With --url, every URL is an appliance\n"
    "  --database  rackgated's \"database\" (postgresql://...); with --url, the\n"
    "              appliances' database, read with psql for its statistics\n"
    "  --database-env  take --database from this environment variable; exit 77\n"
    "              (skipped) when it is unset (meson: RACKGATE_TEST_POSTGRES)\n"
    "  --reference-sqlite  first the same storm on one appliance on SQLite, in the\n"
    "              same run, so that the two rates compare on a shared machine\n"
    "  --ek        the TPMs' EK: rsa (RSA-2048, default), ecc (P-256), ecc384 (P-384)\n"
    "  --ak        the AK: ecc (P-256 ECDSA, default, as rackgate-agent) or rsa (RSASSA)\n"
    "  --eventlog  a binary TCG event log every machine sends; its replay is the PCRs\n"
    "  --deadline  seconds after which unfinished machines count as failed (600)\n"
    "  --client-threads  client loops, each with its own libcurl multi and TPM thread (1)\n"
    "  --cores     cores the ceiling is scaled to (2)\n"
    "  --share-connections  pool the TLS connections across machines (about C in all)\n"
    "              instead of one per machine, kept for its steps (the agent's way)\n"
    "  --max-cpu-over-crypto X  the regression guard: exit 1 when rackgated's CPU per\n"
    "              joined machine is more than X times the essential cryptography\n"
    "              measured in the same run (1 / cost_ratio)\n"
    "  --bundle-bytes N  first a phase where every machine fetches the agent bundle\n"
    "              (GET /v1/agent/initramfs), C at a time, each over a connection of\n"
    "              its own, the body hashed as it arrives and checked against the ETag;\n"
    "              rackgated's peak RSS growth during the phase is reported. Managed:\n"
    "              rackgated serves N random bytes; with --url, the appliance's own\n"
    "              bundle (any N > 0)\n"
    "  --ack-log   append a line per acknowledged step (evidence HOST, config HOST\n"
    "              SHA256, csr HOST SERIAL; then appliance=a|b|... t=EPOCH_SECONDS),\n"
    "              written before the next step starts:\n"
    "              the crash test checks each against the database\n"
    "  --set       a rackgated config key for this run, e.g. --set max_open_sessions=100\n"
    "  --keep      keep the working directory (state, logs, inventory) afterwards\n"
    "Last line: boot-storm: machines=N ok=N failed=F rate=R/s p50=Xms p99=Yms\n"
    "           ceiling=C/s ratio=Z peak_rss=M MiB rackgated_cpu_per_machine=Xms\n"
    "           essential_crypto_per_machine=Yms cost_ratio=Z rackgated_p99_le=Xms\n"
    "  ratio: rate over the two-core ceiling of the appliance's cryptography, which a\n"
    "  fleet simulated on the same cores cannot reach; cost_ratio: the essential\n"
    "  cryptography per machine over rackgated's CPU per joined machine;\n"
    "  rackgated_p99_le: the worst step's p99 in rackgated's own histogram (a bucket bound)\n"
    "  and with several appliances or a --database: appliances=N backend=postgresql\n"
    "  rackgated_cpu_per_machine=a:Xms,b:Yms (each one's CPU over the machines it\n"
    "  joined) [postgres_cpu_per_machine=Xms (a server on this machine whose\n"
    "  data_directory the URL's user may read)] [sqlite_rate=R/s\n"
    "  sqlite_cpu_per_machine=Xms ratio_vs_sqlite=Z]\n"
    "  and with --bundle-bytes: bundle_mib=X bundle_ok=N bundle_rate=R/s bundle_p99=Xms\n"
    "  bundle_rss_growth=Y MiB (rackgated's peak RSS during the phase over its RSS before)\n";

struct Options {
  size_t machines = 2000;
  // Several appliances on one database (docs/performance.md "Two appliances
  // on PostgreSQL"): machine i starts on appliance i mod N and moves to the
  // next one on a connection error or a 5xx, as rackgate-agent does.
  int appliances = 1;
  std::string database;        // rackgated's "database" (managed), or the appliances' (external, for its stats)
  std::string database_env;    // read --database from this variable; unset: skip (exit 77)
  bool reference_sqlite = false;  // with --database: one appliance on SQLite first, in the same run
  std::vector<std::string> urls;  // --url, repeatable and comma-separated: the appliances
  std::vector<pid_t> pids;        // --pid, likewise: their rackgated, in the order of --url
  int concurrency = 200;
  int client_threads = 1;  // independent libcurl loops (and TPM threads), C split between them
  std::string rackgated, rackgatectl;
  std::string ca, socket, ek_ca_dir;
  std::string pool = "storm";
  uint16_t ek_type = attest::kAlgRsa;
  uint16_t ek_curve = attest::kEccNistP256;
  uint16_t ak_type = attest::kAlgEcc;
  std::string eventlog;
  double deadline = 600;
  int threads = 0;  // 0: rackgated's own default
  int cores = 2;
  bool keep = false;
  bool share_connections = false;
  double max_cpu_over_crypto = 0;  // 0: no guard
  std::string workdir;
  std::string ack_log;  // every 200 the appliance acknowledged, a line each
  size_t bundle_bytes = 0;  // 0: no bundle phase
  std::vector<std::pair<std::string, std::string>> config_overrides;  // --set KEY=JSON
  bool managed() const { return !rackgated.empty(); }
};

// The rackgated this benchmark started (one per appliance), stopped on
// every way out.
std::vector<pid_t> g_daemons;

void StopDaemon() {
  for (pid_t pid : g_daemons) {
    if (pid > 0) ::kill(pid, SIGTERM);
  }
  for (pid_t pid : g_daemons) {
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  g_daemons.clear();
}

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "boot-storm: %s\n", msg.c_str());
  StopDaemon();
  std::exit(1);
}

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Die("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  if (!f) Die("cannot write " + path);
}

// --------------------------------------------------------------- processes ----

pid_t Spawn(const std::vector<std::string>& args, const std::string& out_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) Die("cannot start " + args[0] + ": " + std::strerror(rc));
  return pid;
}

int Wait(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs a command to completion; its output goes to `out_path`.
int Run(const std::vector<std::string>& args, const std::string& out_path) {
  return Wait(Spawn(args, out_path));
}

void RunOrDie(const std::vector<std::string>& args, const std::string& out_path) {
  if (int rc = Run(args, out_path); rc != 0) {
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    Die("`" + cmd + "` exited " + std::to_string(rc) + ":\n" + ReadFile(out_path));
  }
}

uint16_t FreePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Die("no free port");
  }
  ::close(s);
  return ntohs(a.sin_port);
}

// A /proc/PID/status field in KiB (VmHWM: peak resident set; VmRSS: now).
long StatusKib(pid_t pid, const char* field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::strtol(line.c_str() + key.size(), nullptr, 10);
  }
  return -1;
}
long PeakRssKib(pid_t pid) { return StatusKib(pid, "VmHWM"); }

// Starts VmHWM over from the current RSS (proc(5), clear_refs "5").
bool ResetPeakRss(pid_t pid) {
  std::ofstream f("/proc/" + std::to_string(pid) + "/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// Fields 3.. of /proc/PID/stat (proc(5)), after the command's parentheses;
// empty when the process is gone.
std::vector<std::string> ProcStat(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string s;
  std::getline(f, s);
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream in(s.substr(close + 2));
  std::vector<std::string> fields(3);  // fields[3] is field 3 (state)
  for (std::string field; in >> field;) fields.push_back(field);
  return fields;
}

double Ticks(const std::vector<std::string>& stat, std::initializer_list<int> fields) {
  double ticks = 0;
  for (int i : fields) ticks += i < static_cast<int>(stat.size()) ? std::strtod(stat[i].c_str(), nullptr) : 0;
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// utime + stime of a process, seconds.
double ProcessCpuSeconds(pid_t pid) {
  const auto stat = ProcStat(std::to_string(pid));
  return stat.empty() ? -1 : Ticks(stat, {14, 15});
}

// A process and all its children's CPU, seconds: its own utime + stime, its
// reaped children's (cutime + cstime) and its live children's. For
// PostgreSQL's postmaster that is the whole server: every backend is its
// child, reaped when its connection ends.
double ProcessTreeCpuSeconds(pid_t pid) {
  const auto stat = ProcStat(std::to_string(pid));
  if (stat.empty()) return -1;
  double cpu = Ticks(stat, {14, 15, 16, 17});
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto child = ProcStat(name);
    if (child.size() > 4 && child[4] == std::to_string(pid)) cpu += Ticks(child, {14, 15});
  }
  return cpu;
}

// Busy and total CPU time of the whole machine (/proc/stat), seconds.
std::pair<double, double> SystemCpuSeconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  double v[10] = {};
  f >> cpu;
  for (double& x : v) f >> x;
  const double idle = v[3] + v[4];
  double total = 0;
  for (int i = 0; i < 8; ++i) total += v[i];  // guest time is inside user
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {(total - idle) / hz, total / hz};
}

double SelfCpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

size_t WriteToString(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// A blocking GET, for readiness checks and /metrics: the HTTP status, 0 on
// no answer.
long SimpleGet(const std::string& url, const std::string& ca, std::string* out = nullptr) {
  CURL* e = curl_easy_init();
  std::string scratch;
  std::string& body = out != nullptr ? *out : scratch;
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(e, CURLOPT_CAPATH, nullptr);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, WriteToString);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
  long status = 0;
  if (curl_easy_perform(e) == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(e);
  return status;
}

// ----------------------------------------------------------------- templates ----

// The pool's templates: a public config of the agent's size (its unit, the
// appliance URL and CA) and an attested one with what a node really gets
// (kubeconfig, pull secret, hostname, kubelet settings), about 5 KB merged.
std::string PublicTemplate() {
  json files = json::array();
  files.push_back({{"path", "/etc/rackgate/ca.pem"}, {"mode", 420},
                   {"contents", {{"source", "data:,{{appliance.ca_pem}}"}}}});
  files.push_back({{"path", "/etc/rackgate/agent.env"}, {"mode", 420},
                   {"contents", {{"source", "data:,RACKGATE_URL%3D{{appliance.url}}%0ARACKGATE_CA%3D/etc/rackgate/ca.pem%0A"}}}});
  const std::string unit =
      "[Unit]\nDescription=rackgate agent\nAfter=network-online.target\nWants=network-online.target\n"
      "[Service]\nType=oneshot\nEnvironmentFile=/etc/rackgate/agent.env\n"
      "ExecStart=/usr/bin/rackgate-agent --steps attest,config,csr\n[Install]\nWantedBy=multi-user.target\n";
  return json{{"ignition", {{"version", "3.3.0"}}},
              {"storage", {{"files", files}}},
              {"systemd", {{"units", json::array({{{"name", "rackgate-agent.service"}, {"enabled", true}, {"contents", unit}}})}}}}
      .dump();
}

std::string AttestedTemplate() {
  const std::string kubeconfig =
      "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: " + std::string(1400, 'Q') +
      "\n    server: https://api.cluster.example:6443\n  name: cluster\ncontexts:\n- context:\n    cluster: cluster\n"
      "    user: kubelet\n  name: kubelet\ncurrent-context: kubelet\nusers:\n- name: kubelet\n  user:\n"
      "    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n"
      "    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n";
  json files = json::array();
  files.push_back({{"path", "/etc/kubernetes/kubeconfig"}, {"mode", 384}, {"rackgate", {{"secret", true}}},
                   {"contents", {{"source", "data:;base64," + wire::Base64Encode(Bytes(kubeconfig.begin(), kubeconfig.end()))}}}});
  files.push_back({{"path", "/var/lib/kubelet/config.json"}, {"mode", 384}, {"rackgate", {{"secret", true}}},
                   {"contents", {{"source", "data:,%7B%22auths%22%3A%7B%22quay.io%22%3A%7B%22auth%22%3A%22" +
                                                std::string(600, 'A') + "%22%7D%7D%7D"}}}});
  files.push_back({{"path", "/etc/hostname"}, {"mode", 420}, {"overwrite", true},
                   {"contents", {{"source", "data:,{{hostname}}"}}}});
  files.push_back({{"path", "/etc/kubernetes/kubelet-node.env"}, {"mode", 420},
                   {"contents", {{"source", "data:,NODE_NAME%3D{{hostname}}%0AEK%3D{{ek_hash}}%0A"}}}});
  return json{{"ignition", {{"version", "3.3.0"}}}, {"storage", {{"files", files}}}}.dump();
}

// ------------------------------------------------------------------ the storm ----

enum Step { kChallenge = 0, kEvidence, kConfig, kCsr, kSteps };
const char* const kStepNames[kSteps] = {"challenge", "evidence", "config", "csr"};
const char* const kStepMethods[kSteps] = {"POST", "POST", "GET", "POST"};
const char* const kStepPaths[kSteps] = {"/v1/attest/challenge", "/v1/attest/evidence", "/v1/machine/config",
                                        "/v1/machine/csr"};

struct Flight {
  size_t index = 0;
  SimMachine* m = nullptr;
  Step step = kChallenge;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;      // the request body (outlives the transfer)
  std::string response;  // the answer's body
  Clock::time_point machine_start, request_start;
  std::string token;
  std::string failure;  // set by the TPM thread when it cannot answer
  int attempts = 0;
  bool connected = false;  // it has opened its own connection (without --share-connections)
  size_t appliance = 0;   // the appliance this machine talks to now
  size_t round_failed = 0;  // appliances that failed it since its last answer or wait
  double round_wait = 0;    // the soonest Retry-After among them (0: none said)
};

struct Stats {
  std::vector<double> step_ms[kSteps];
  std::vector<double> machine_ms;
  std::map<std::string, int> waits;     // 503/429 answers waited out, by step and reason
  std::map<std::string, int> failures;  // machines failed, by reason
  std::map<std::string, int> transport; // transport errors retried
  std::map<std::string, int> moved;     // moves to the next appliance, by step, appliance and cause
  std::vector<size_t> joined;           // machines whose certificate each appliance issued
  size_t ok = 0, failed = 0;
  double seconds = 0;
  double client_cpu = 0;
  size_t connections = 0;  // TLS connections the client opened
};

// Appliance k's name in the report: a, b, c, ...
std::string AppName(size_t k) {
  return k < 26 ? std::string(1, static_cast<char>('a' + k)) : "#" + std::to_string(k);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

std::string ErrorReason(const std::string& body) {
  auto e = wire::DecodeRefusal(body);
  return e.ok() && !e->reason.empty() ? text::PrintableAscii(e->reason, 64) : "?";
}

// ------------------------------------------------------------ the bundle phase ----

// Every machine fetches the agent bundle, C at a time (--bundle-bytes): each
// over a connection of its own, as a machine's boot loader does; the body is
// hashed as it arrives (the client keeps none of it) and checked against the
// ETag, the SHA-256 rackgated names. A 503/429 is waited out (Retry-After);
// anything else is a failure.
struct BundleStats {
  size_t ok = 0, failed = 0;
  std::map<std::string, int> failures;
  std::vector<double> ms;
  double seconds = 0;
  uint64_t bytes = 0;
};

struct BundleFetch {
  size_t index = 0;
  CURL* easy = nullptr;
  ossl::MdCtxPtr sha;
  uint64_t received = 0;
  std::string etag;
  std::string head;  // a refusal's body, for its reason (bounded)
  Clock::time_point start;
};

size_t BundleBody(char* data, size_t size, size_t n, void* userp) {
  auto* f = static_cast<BundleFetch*>(userp);
  EVP_DigestUpdate(f->sha.get(), data, size * n);
  f->received += size * n;
  if (f->head.size() < 4096) f->head.append(data, std::min<size_t>(size * n, 4096 - f->head.size()));
  return size * n;
}

size_t BundleHeader(char* data, size_t size, size_t n, void* userp) {
  auto* f = static_cast<BundleFetch*>(userp);
  std::string line(data, size * n);
  if (line.size() > 5 && strncasecmp(line.c_str(), "etag:", 5) == 0) {
    const size_t a = line.find('"'), b = line.rfind('"');
    f->etag = a != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : "";
  }
  return size * n;
}

BundleStats FetchBundles(size_t machines, int concurrency, const std::vector<std::string>& bases,
                         const std::string& ca, double deadline_s) {
  BundleStats st;
  CURLM* multi = curl_multi_init();
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(concurrency + 16));
  std::vector<std::unique_ptr<BundleFetch>> fetches(machines);
  std::multimap<Clock::time_point, BundleFetch*> timers;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(static_cast<long>(deadline_s * 1000));
  size_t next = 0, active = 0, done = 0;
  auto begin = [&](BundleFetch* f) {
    f->sha.reset(EVP_MD_CTX_new());
    EVP_DigestInit_ex(f->sha.get(), EVP_sha256(), nullptr);
    f->received = 0;
    f->etag.clear();
    f->head.clear();
    CURL* e = f->easy;
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    curl_easy_setopt(e, CURLOPT_URL, (bases[f->index % bases.size()] + "/v1/agent/initramfs").c_str());
    curl_easy_setopt(e, CURLOPT_CAINFO, ca.c_str());
    curl_easy_setopt(e, CURLOPT_CAPATH, nullptr);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 600000L);
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, BundleBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, BundleHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
    f->start = Clock::now();
    curl_multi_add_handle(multi, e);
  };
  auto finish = [&](BundleFetch* f, const std::string& failure) {
    if (failure.empty()) {
      ++st.ok;
      st.ms.push_back(Since(f->start) * 1000);
      st.bytes += f->received;
    } else {
      ++st.failed;
      ++st.failures[failure];
    }
    curl_easy_cleanup(f->easy);
    f->easy = nullptr;
    f->sha.reset();
    ++done;
    --active;
  };
  while (done < machines) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    while (active < static_cast<size_t>(concurrency) && next < machines) {
      fetches[next] = std::make_unique<BundleFetch>();
      BundleFetch* f = fetches[next].get();
      f->index = next++;
      f->easy = curl_easy_init();
      ++active;
      begin(f);
    }
    while (!timers.empty() && timers.begin()->first <= now) {
      BundleFetch* f = timers.begin()->second;
      timers.erase(timers.begin());
      begin(f);
    }
    int running = 0;
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      BundleFetch* f = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&f));
      const CURLcode rc = msg->data.result;
      curl_multi_remove_handle(multi, f->easy);
      if (rc != CURLE_OK) {
        finish(f, std::string("transport: ") + curl_easy_strerror(rc));
        continue;
      }
      long status = 0;
      curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
      if (status == 503 || status == 429) {
        curl_off_t after = 0;
        curl_easy_getinfo(f->easy, CURLINFO_RETRY_AFTER, &after);
        timers.emplace(Clock::now() + std::chrono::seconds(after > 0 ? after : 1), f);
        continue;
      }
      if (status != 200) {
        finish(f, std::to_string(status) + " " + ErrorReason(f->head));
        continue;
      }
      unsigned char md[EVP_MAX_MD_SIZE];
      unsigned int md_len = 0;
      EVP_DigestFinal_ex(f->sha.get(), md, &md_len);
      static const char kHex[] = "0123456789abcdef";
      std::string hex;
      for (unsigned int i = 0; i < md_len; ++i) {
        hex += kHex[md[i] >> 4];
        hex += kHex[md[i] & 15];
      }
      finish(f, hex == f->etag ? "" : "the body's SHA-256 is not its ETag");
    }
    curl_multi_poll(multi, nullptr, 0, timers.empty() ? 100 : 10, nullptr);
  }
  st.seconds = Since(start);
  for (auto& f : fetches) {
    if (f && f->easy != nullptr) {
      curl_multi_remove_handle(multi, f->easy);
      finish(f.get(), "deadline");
    }
  }
  st.failed += machines - next;
  if (machines > next) st.failures["deadline (not started)"] += static_cast<int>(machines - next);
  curl_multi_cleanup(multi);
  return st;
}

class Storm {
 public:
  // `fleet` is every `stride`-th machine of the whole fleet from `first`:
  // machine i of the fleet starts on appliance i mod bases.size().
  Storm(std::vector<SimMachine>* fleet, const Options& o, std::vector<std::string> bases, std::string ca,
        attest::PcrValues pcrs, std::optional<Bytes> eventlog, size_t first = 0, size_t stride = 1)
      : fleet_(fleet), o_(o), bases_(std::move(bases)), ca_(std::move(ca)), pcrs_(std::move(pcrs)),
        eventlog_(std::move(eventlog)), first_(first), stride_(stride) {}

  Stats Run() {
    stats_.joined.assign(bases_.size(), 0);
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(o_.concurrency + 16));
    // Event-driven: libcurl says which sockets to watch (epoll) and when its
    // next timeout is; only sockets that are ready are serviced, so the cost
    // per event does not grow with the number of machines in flight.
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_ < 0 || wake_ < 0) Die("epoll/eventfd");
    epoll_event wev{};
    wev.events = EPOLLIN;
    wev.data.fd = wake_;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &wev);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &Storm::SocketCallback);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &Storm::TimerCallback);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    const double cpu0 = SelfCpuSeconds();
    start_ = Clock::now();
    std::thread tpm([this] { TpmLoop(); });
    const auto deadline = start_ + std::chrono::milliseconds(static_cast<long>(o_.deadline * 1000));
    size_t next = 0, finished = 0, active = 0;
    const size_t n = fleet_->size();
    std::multimap<Clock::time_point, Flight*> timers;
    std::vector<std::unique_ptr<Flight>> flights;
    flights.reserve(n);

    auto finish = [&](Flight* f, const std::string& failure) {
      if (failure.empty()) {
        ++stats_.ok;
        stats_.machine_ms.push_back(Since(f->machine_start) * 1000);
      } else {
        ++stats_.failed;
        ++stats_.failures[failure];
      }
      curl_easy_cleanup(f->easy);
      f->easy = nullptr;
      curl_slist_free_all(f->headers);
      f->headers = nullptr;
      std::string().swap(f->body);
      std::string().swap(f->response);
      ++finished;
      --active;
    };
    // Waits out `seconds` and starts `step` again.
    auto retry = [&](Flight* f, Step step, double seconds) {
      f->step = step;
      timers.emplace(Clock::now() + std::chrono::milliseconds(static_cast<long>(seconds * 1000)), f);
    };
    // The appliance failed the step (no answer, or a 5xx/429 saying
    // `retry_after`, 0 when it did not): as rackgate-agent, the step goes to
    // the next appliance at once (an attestation step from a fresh
    // challenge), and the machine waits only when every appliance has failed
    // it since its last answer: the soonest Retry-After among them, else a
    // second. With one appliance: wait and try again, as always.
    auto move_on = [&](Flight* f, Step step, double retry_after) {
      const size_t n_app = bases_.size();
      if (retry_after > 0 && (f->round_wait <= 0 || retry_after < f->round_wait)) f->round_wait = retry_after;
      f->appliance = (f->appliance + 1) % n_app;
      const Step again = step <= kEvidence ? kChallenge : step;
      if (++f->round_failed < n_app) {
        retry(f, again, 0);
        return;
      }
      const double wait = f->round_wait > 0 ? f->round_wait : 1.0;
      f->round_failed = 0;
      f->round_wait = 0;
      retry(f, again, wait);
    };

    while (finished < n) {
      const auto now = Clock::now();
      if (now >= deadline) {
        // Everything still in flight has failed: stop the TPM thread first.
        {
          std::lock_guard<std::mutex> l(mu_);
          stop_ = true;
        }
        cv_.notify_all();
        break;
      }
      while (active < static_cast<size_t>(o_.concurrency) && next < n) {
        auto f = std::make_unique<Flight>();
        f->index = next;
        f->m = &(*fleet_)[next];
        f->machine_start = Clock::now();
        f->appliance = (first_ + next * stride_) % bases_.size();
        f->easy = curl_easy_init();
        ++next;
        ++active;
        Start(f.get(), kChallenge);
        flights.push_back(std::move(f));
      }
      while (!timers.empty() && timers.begin()->first <= now) {
        Flight* f = timers.begin()->second;
        timers.erase(timers.begin());
        Start(f, f->step);
      }
      // Answers the TPM thread made ready: send the evidence.
      std::deque<Flight*> ready;
      {
        std::lock_guard<std::mutex> l(mu_);
        ready.swap(done_);
      }
      for (Flight* f : ready) {
        if (!f->failure.empty()) {
          finish(f, f->failure);
        } else {
          Start(f, kEvidence);
        }
      }

      int running = 0;
      if (curl_due_ && Clock::now() >= *curl_due_) {
        curl_due_.reset();
        curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
      }
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        Flight* f = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&f));
        const CURLcode rc = msg->data.result;
        long opened = 0;
        if (curl_easy_getinfo(f->easy, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0) {
          stats_.connections += static_cast<size_t>(opened);
        }
        curl_multi_remove_handle(multi_, f->easy);
        const double ms = Since(f->request_start) * 1000;
        const Step step = f->step;
        const bool several = bases_.size() > 1;
        if (rc != CURLE_OK) {
          ++stats_.transport[std::string(kStepNames[step]) + " " + curl_easy_strerror(rc)];
          if (several) ++stats_.moved[std::string(kStepNames[step]) + " from " + AppName(f->appliance) + ": no answer"];
          move_on(f, step, 0);
          continue;
        }
        long status = 0;
        curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
        // Any 5xx moves on when there are several appliances; with one, only
        // a waitable 503/429 is tried again (any other answer is final).
        if (status == 503 || status == 429 || (several && status >= 500)) {
          curl_off_t after = 0;
          curl_easy_getinfo(f->easy, CURLINFO_RETRY_AFTER, &after);
          const std::string what = std::to_string(status) + " " + ErrorReason(f->response);
          ++stats_.waits[std::string(kStepNames[step]) + " " + what];
          if (several) ++stats_.moved[std::string(kStepNames[step]) + " from " + AppName(f->appliance) + ": " + what];
          move_on(f, step, after > 0 ? static_cast<double>(after) : 0);
          continue;
        }
        f->round_failed = 0;
        f->round_wait = 0;
        // A session used, expired or unknown (an evidence retried after its
        // answer was lost) is no verdict on the machine: start again, as the
        // agent does.
        const std::string reason = ErrorReason(f->response);
        if (status == 403 && step == kEvidence && reason.rfind("session_", 0) == 0) {
          ++stats_.waits[std::string(kStepNames[step]) + " 403 " + reason];
          retry(f, kChallenge, 0.1);
          continue;
        }
        if (status != 200) {
          finish(f, std::string(kStepNames[step]) + " " + std::to_string(status) + " " + reason);
          continue;
        }
        stats_.step_ms[step].push_back(ms);
        if (debug_slow_ms_ > 0 && ms > debug_slow_ms_) {
          double connect = 0, tls = 0, pre = 0, first = 0;
          curl_easy_getinfo(f->easy, CURLINFO_CONNECT_TIME, &connect);
          curl_easy_getinfo(f->easy, CURLINFO_APPCONNECT_TIME, &tls);
          curl_easy_getinfo(f->easy, CURLINFO_PRETRANSFER_TIME, &pre);
          curl_easy_getinfo(f->easy, CURLINFO_STARTTRANSFER_TIME, &first);
          std::fprintf(stderr, "slow %s %.0fms at +%.1fs: connect %.0f tls %.0f pretransfer %.0f first byte %.0f ms\n",
                       kStepNames[step], ms, Since(start_), connect * 1000, tls * 1000, pre * 1000, first * 1000);
        }
        switch (step) {
          case kChallenge: {
            std::lock_guard<std::mutex> l(mu_);
            jobs_.push_back(f);
            cv_.notify_one();
            break;
          }
          case kEvidence: {
            auto token = wire::DecodeToken(f->response);
            if (!token.ok()) {
              finish(f, "evidence answer without a token");
              break;
            }
            f->token = std::move(token->token);
            Ack(f, "evidence " + f->m->hostname);
            Start(f, kConfig);
            break;
          }
          case kConfig: {
            json j = json::parse(f->response, nullptr, false);
            if (!j.is_object() || !j.contains("ignition")) {
              finish(f, "config answer is not an Ignition config");
              break;
            }
            Ack(f, "config " + f->m->hostname + " " + core::Sha256Hex(f->response));
            Start(f, kCsr);
            break;
          }
          case kCsr: {
            auto issued = wire::DecodeIssuedCertificate(f->response);
            if (!issued.ok()) {
              finish(f, "csr answer without a certificate");
              break;
            }
            Ack(f, "csr " + f->m->hostname + " " + issued->serial);
            ++stats_.joined[f->appliance];
            finish(f, "");
            break;
          }
          default: break;
        }
      }
      // Sleep until a socket is ready, the TPM thread has an answer, or the
      // next timer is due.
      long timeout_ms = 100;
      if (!timers.empty()) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(timers.begin()->first - Clock::now()).count();
        timeout_ms = std::clamp<long>(wait, 0, 100);
      }
      if (active < static_cast<size_t>(o_.concurrency) && next < n) timeout_ms = 0;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (!done_.empty()) timeout_ms = 0;
      }
      if (curl_due_) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(*curl_due_ - Clock::now()).count();
        timeout_ms = std::clamp<long>(wait, 0, timeout_ms);
      }
      epoll_event events[512];
      const int ready_n = epoll_wait(epoll_, events, 512, static_cast<int>(timeout_ms));
      for (int i = 0; i < ready_n; ++i) {
        if (events[i].data.fd == wake_) {
          uint64_t v = 0;
          ssize_t r = ::read(wake_, &v, sizeof(v));
          (void)r;
          continue;
        }
        int flags = 0;
        if (events[i].events & EPOLLIN) flags |= CURL_CSELECT_IN;
        if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
        if (events[i].events & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(multi_, events[i].data.fd, flags, &running);
      }
    }
    stats_.seconds = Since(start_);
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    tpm.join();
    for (auto& f : flights) {
      if (f->easy != nullptr) {
        curl_multi_remove_handle(multi_, f->easy);
        finish(f.get(), "deadline (" + std::string(kStepNames[f->step]) + ")");
      }
    }
    stats_.failed += n - next;
    if (n > next) stats_.failures["deadline (not started)"] += static_cast<int>(n - next);
    stats_.client_cpu = SelfCpuSeconds() - cpu0;
    curl_multi_cleanup(multi_);
    ::close(epoll_);
    ::close(wake_);
    return stats_;
  }

 private:
  static int SocketCallback(CURL*, curl_socket_t s, int what, void* userp, void* socketp) {
    auto* self = static_cast<Storm*>(userp);
    if (what == CURL_POLL_REMOVE) {
      epoll_ctl(self->epoll_, EPOLL_CTL_DEL, s, nullptr);
      return 0;
    }
    epoll_event ev{};
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    ev.data.fd = s;
    if (socketp == nullptr) {
      if (epoll_ctl(self->epoll_, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST) {
        epoll_ctl(self->epoll_, EPOLL_CTL_MOD, s, &ev);
      }
      curl_multi_assign(self->multi_, s, self);
    } else if (epoll_ctl(self->epoll_, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT) {
      epoll_ctl(self->epoll_, EPOLL_CTL_ADD, s, &ev);
    }
    return 0;
  }

  static int TimerCallback(CURLM*, long timeout_ms, void* userp) {
    auto* self = static_cast<Storm*>(userp);
    if (timeout_ms < 0) {
      self->curl_due_.reset();
    } else {
      self->curl_due_ = Clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    return 0;
  }

  void Start(Flight* f, Step step) {
    const std::string& base_ = bases_[f->appliance];
    f->step = step;
    ++f->attempts;
    f->response.clear();
    curl_slist_free_all(f->headers);
    f->headers = nullptr;
    CURL* e = f->easy;
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    // The appliance's CA alone, as the agent trusts it (no system CA
    // directory). It also lets libcurl keep one parsed CA store for the
    // multi handle: with a CA directory it builds one per connection,
    // 0.4 ms of the client's CPU for each of a storm's new connections.
    curl_easy_setopt(e, CURLOPT_CAINFO, ca_.c_str());
    curl_easy_setopt(e, CURLOPT_CAPATH, nullptr);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 60000L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, WriteToString);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &f->response);
    std::string url;
    const bool post = std::strcmp(kStepMethods[step], "POST") == 0;
    switch (step) {
      case kChallenge:
        url = base_ + kStepPaths[kChallenge];
        f->body = f->m->challenge_body;
        break;
      case kEvidence:
        url = base_ + kStepPaths[kEvidence];
        break;  // the body is the TPM thread's
      case kConfig:
        url = base_ + kStepPaths[kConfig];
        f->headers = curl_slist_append(f->headers, ("Authorization: Bearer " + f->token).c_str());
        f->headers = curl_slist_append(
            f->headers, "Accept: application/vnd.coreos.ignition+json;version=3.3.0, */*;q=0.1");
        break;
      case kCsr:
        url = base_ + kStepPaths[kCsr];
        f->headers = curl_slist_append(f->headers, ("Authorization: Bearer " + f->token).c_str());
        f->body = wire::EncodeCsrRequest({"kubernetes.io/kube-apiserver-client-kubelet", f->m->csr_pem, {}, {}});
        break;
      default: break;
    }
    if (post) {
      f->headers = curl_slist_append(f->headers, "Content-Type: application/json");
      f->headers = curl_slist_append(f->headers, "Expect:");
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, f->body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(f->body.size()));
    }
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers);
    if (!o_.share_connections) {
      // One connection per machine, as a node has its own: opened by its
      // first request, closed after its last. (Between its steps libcurl may
      // lend it to another machine's step; the count stays one per machine.)
      if (!f->connected) curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
      f->connected = true;
      if (step == kCsr) curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    }
    f->request_start = Clock::now();
    curl_multi_add_handle(multi_, e);
  }

  // The TPMs: ActivateCredential and the quote for every answered challenge.
  void TpmLoop() {
    for (;;) {
      Flight* f = nullptr;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        f = jobs_.front();
        jobs_.pop_front();
      }
      f->failure = Answer(f);
      {
        std::lock_guard<std::mutex> l(mu_);
        done_.push_back(f);
      }
      const uint64_t one = 1;
      ssize_t w = ::write(wake_, &one, sizeof(one));
      (void)w;
    }
  }

  // Builds the evidence body from the challenge answer; a failure reason
  // when the machine cannot answer.
  std::string Answer(Flight* f) {
    auto ch = wire::DecodeChallenge(f->response);
    if (!ch.ok()) return "challenge answer: " + ch.status().message();
    auto cred = attest::DecodeCredentialFile(ch->credential);
    if (!cred.ok()) return "credential: " + cred.status().reason();
    std::optional<Bytes> secret = f->m->ek.ActivateCredential(*cred, f->m->ak_name);
    if (!secret) return "ActivateCredential refused the credential";
    testing::SoftQuoteSpec q;
    q.selection = ch->pcr_selection;
    q.hash_alg = attest::kAlgSha256;
    // The TPM's clock runs from its power-on; one boot, no restarts.
    q.clock = attest::ClockInfo{static_cast<uint64_t>(Since(start_) * 1000) + 5000, 1, 0, true};
    q.qualified_signer = f->m->ak_qualified_name;
    q.firmware_version = 0x2023000100000000ull;
    wire::EvidenceRequest ev;
    for (const auto& s : ch->pcr_selection) {
      auto bank = pcrs_.find(s.hash_alg);
      if (bank == pcrs_.end()) return "no PCR bank " + attest::HashAlgName(s.hash_alg);
      auto& out = ev.pcrs[s.hash_alg];
      for (uint32_t i : s.pcrs) {
        auto v = bank->second.find(i);
        if (v == bank->second.end()) return "no value for PCR " + std::to_string(i);
        out[i] = v->second;
      }
    }
    try {
      ev.quote = testing::MakeQuoteMessage(q, pcrs_, ch->nonce);
    } catch (const std::exception& e) {
      return std::string("quote: ") + e.what();
    }
    ev.signature = f->m->ak.Sign(ev.quote);
    ev.session = std::move(ch->session);
    ev.secret = std::move(*secret);
    ev.event_log = eventlog_;
    f->body = wire::EncodeEvidenceRequest(ev);
    return "";
  }

  std::vector<SimMachine>* fleet_;
  // One line per acknowledged step, flushed at once (the appliance, not this
  // process, is what the crash test kills). After the step's own fields:
  // the appliance that acknowledged it (a, b, ...) and the wall-clock time,
  // `t=EPOCH_SECONDS`, which the failover test lines up with its faults.
  void Ack(const Flight* f, const std::string& line) {
    if (o_.ack_log.empty()) return;
    if (!ack_) ack_ = std::fopen(o_.ack_log.c_str(), "a");
    if (!ack_) Die("cannot open " + o_.ack_log);
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    std::fprintf(ack_, "%s appliance=%s t=%ld.%03ld\n", line.c_str(), AppName(f->appliance).c_str(),
                 static_cast<long>(now.tv_sec), now.tv_nsec / 1000000);
    std::fflush(ack_);
  }

  const Options& o_;
  std::FILE* ack_ = nullptr;
  const std::vector<std::string> bases_;
  const std::string ca_;
  const attest::PcrValues pcrs_;
  const std::optional<Bytes> eventlog_;
  const size_t first_, stride_;
  CURLM* multi_ = nullptr;
  int epoll_ = -1;
  int wake_ = -1;
  std::optional<Clock::time_point> curl_due_;  // libcurl's next timeout
  // BOOT_STORM_SLOW_MS: print the phases of every request slower than this.
  const double debug_slow_ms_ = std::getenv("BOOT_STORM_SLOW_MS") ? std::atof(std::getenv("BOOT_STORM_SLOW_MS")) : 0;
  Clock::time_point start_;
  Stats stats_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Flight*> jobs_;  // guarded by mu_
  std::deque<Flight*> done_;  // guarded by mu_
  bool stop_ = false;         // guarded by mu_
};

// ------------------------------------------------------------------- setup ----

Options ParseArgs(int argc, char** argv) {
  Options o;
  auto need = [&](int& i) -> std::string {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "boot-storm: %s needs a value\n\n%s", argv[i], kUsage);
      std::exit(2);
    }
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--machines") {
      o.machines = std::stoul(need(i));
    } else if (a == "--concurrency") {
      o.concurrency = std::stoi(need(i));
    } else if (a == "--rackgated") {
      o.rackgated = fs::absolute(need(i)).string();
    } else if (a == "--rackgatectl") {
      o.rackgatectl = fs::absolute(need(i)).string();
    } else if (a == "--url") {
      std::string v = need(i);
      std::replace(v.begin(), v.end(), ',', ' ');
      std::istringstream in(v);
      for (std::string u; in >> u;) o.urls.push_back(u);
    } else if (a == "--ca") {
      o.ca = fs::absolute(need(i)).string();
    } else if (a == "--socket") {
      o.socket = need(i);
    } else if (a == "--ek-ca-dir") {
      o.ek_ca_dir = fs::absolute(need(i)).string();
    } else if (a == "--pid") {
      std::string v = need(i);
      std::replace(v.begin(), v.end(), ',', ' ');
      std::istringstream in(v);
      for (std::string p; in >> p;) o.pids.push_back(static_cast<pid_t>(std::stol(p)));
    } else if (a == "--appliances") {
      o.appliances = std::stoi(need(i));
      if (o.appliances < 1 || o.appliances > 8) throw std::runtime_error("--appliances: 1 to 8");
    } else if (a == "--database") {
      o.database = need(i);
    } else if (a == "--database-env") {
      o.database_env = need(i);
    } else if (a == "--reference-sqlite") {
      o.reference_sqlite = true;
    } else if (a == "--pool") {
      o.pool = need(i);
    } else if (a == "--ek") {
      const std::string v = need(i);
      if (v == "rsa") {
        o.ek_type = attest::kAlgRsa;
      } else if (v == "ecc" || v == "ecc256") {
        o.ek_type = attest::kAlgEcc;
        o.ek_curve = attest::kEccNistP256;
      } else if (v == "ecc384") {
        o.ek_type = attest::kAlgEcc;
        o.ek_curve = attest::kEccNistP384;
      } else {
        std::fprintf(stderr, "boot-storm: --ek rsa|ecc|ecc384\n");
        std::exit(2);
      }
    } else if (a == "--ak") {
      const std::string v = need(i);
      if (v != "rsa" && v != "ecc") {
        std::fprintf(stderr, "boot-storm: --ak ecc|rsa\n");
        std::exit(2);
      }
      o.ak_type = v == "rsa" ? attest::kAlgRsa : attest::kAlgEcc;
    } else if (a == "--eventlog") {
      o.eventlog = need(i);
    } else if (a == "--deadline") {
      o.deadline = std::stod(need(i));
    } else if (a == "--client-threads") {
      o.client_threads = std::stoi(need(i));
      if (o.client_threads < 1 || o.client_threads > 64) throw std::runtime_error("--client-threads: 1 to 64");
    } else if (a == "--threads") {
      o.threads = std::stoi(need(i));
    } else if (a == "--cores") {
      o.cores = std::stoi(need(i));
    } else if (a == "--set") {
      const std::string v = need(i);
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "boot-storm: --set KEY=JSON\n");
        std::exit(2);
      }
      o.config_overrides.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--keep") {
      o.keep = true;
    } else if (a == "--share-connections") {
      o.share_connections = true;
    } else if (a == "--max-cpu-over-crypto") {
      o.max_cpu_over_crypto = std::stod(need(i));
      if (!(o.max_cpu_over_crypto > 0)) throw std::runtime_error("--max-cpu-over-crypto: a positive number");
    } else if (a == "--workdir") {
      o.workdir = fs::absolute(need(i)).string();
    } else if (a == "--ack-log") {
      o.ack_log = need(i);
    } else if (a == "--bundle-bytes") {
      const long long n = std::stoll(need(i));
      if (n <= 0 || n > (64ll << 20)) throw std::runtime_error("--bundle-bytes: 1 to 64 MiB (rackgated's bound)");
      o.bundle_bytes = static_cast<size_t>(n);
    } else {
      std::fprintf(stderr, "boot-storm: unknown argument '%s'\n\n%s", a.c_str(), kUsage);
      std::exit(2);
    }
  }
  if (!o.database_env.empty()) {
    const char* v = std::getenv(o.database_env.c_str());
    if (v == nullptr || *v == '\0') {
      std::printf("boot-storm: skipped: %s is not set, so there is no database to run on (run it through "
                  "`script/pg-lab run -- ...`; without PostgreSQL 15 installed, script/bootstrap installs it)\n",
                  o.database_env.c_str());
      std::exit(77);
    }
    o.database = v;
  }
  const bool managed = !o.rackgated.empty();
  const bool external = !o.urls.empty();
  if (managed && o.appliances > 1 && o.database.empty()) {
    std::fprintf(stderr, "boot-storm: --appliances %d needs --database postgresql://...: appliances share one "
                         "database, and SQLite is one appliance's own\n", o.appliances);
    std::exit(2);
  }
  if (o.reference_sqlite && (!managed || o.database.empty())) {
    std::fprintf(stderr, "boot-storm: --reference-sqlite compares a run on --database with one on SQLite; give "
                         "--rackgated and --database\n");
    std::exit(2);
  }
  if (managed == external || o.rackgatectl.empty() || o.machines == 0 || o.concurrency <= 0 ||
      (external && (o.ca.empty() || o.socket.empty() || o.ek_ca_dir.empty()))) {
    std::fprintf(stderr, "boot-storm: give --rackgated and --rackgatectl, or --url, --ca, --rackgatectl, --socket "
                         "and --ek-ca-dir\n\n%s", kUsage);
    std::exit(2);
  }
  if (external) o.appliances = static_cast<int>(o.urls.size());
  return o;
}

// The PCR values every machine's TPM holds: the event log's replay, or a
// fixed believable boot (the same firmware across the fleet).
attest::PcrValues FleetPcrs(const std::optional<Bytes>& eventlog) {
  attest::PcrValues pcrs;
  for (uint16_t alg : {attest::kAlgSha256, attest::kAlgSha1}) {
    for (uint32_t i = 0; i < 24; ++i) {
      const std::string seed = "boot-storm pcr " + std::to_string(i);
      Bytes d(EVP_MAX_MD_SIZE);
      unsigned int n = 0;
      EVP_Digest(seed.data(), seed.size(), d.data(), &n, alg == attest::kAlgSha256 ? EVP_sha256() : EVP_sha1(),
                 nullptr);
      d.resize(n);
      pcrs[alg][i] = i < 10 ? d : attest::InitialPcrValue(i, n);
    }
  }
  if (eventlog) {
    auto log = attest::ParseEventLog(*eventlog);
    if (!log.ok()) Die("event log: " + log.status().ToString());
    auto replayed = attest::Replay(*log);
    if (!replayed.ok()) Die("event log replay: " + replayed.status().ToString());
    for (auto& [alg, bank] : pcrs) {
      for (auto& [i, v] : bank) v = attest::InitialPcrValue(i, v.size());
    }
    for (const auto& [alg, bank] : *replayed) {
      for (const auto& [i, v] : bank) pcrs[alg][i] = v;
    }
  }
  return pcrs;
}

// rackgated's own time per route, from its /metrics histogram
// rackgate_http_request_duration_seconds: the request's headers read to its
// answer sent (handler queue and 503 refusals included; the TLS handshake
// and the client's own delays not). "METHOD PATTERN" -> upper bound -> cumulative count.
using Histograms = std::map<std::string, std::map<double, double>>;

Histograms ParseDurationHistograms(const std::string& text) {
  static const std::string kPrefix = "rackgate_http_request_duration_seconds_bucket{";
  Histograms out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kPrefix, 0) != 0) continue;
    auto label = [&](const std::string& name) -> std::string {
      const size_t at = line.find(name + "=\"");
      if (at == std::string::npos) return "";
      const size_t from = at + name.size() + 2;
      const size_t to = line.find('"', from);
      return to == std::string::npos ? "" : line.substr(from, to - from);
    };
    // Keyed "METHOD PATTERN", as kStepMethods and kStepPaths name the steps.
    const std::string route = label("method") + " " + label("route"), le = label("le");
    const size_t space = line.rfind(' ');
    if (route.front() == ' ' || route.back() == ' ' || le.empty() || space == std::string::npos) continue;
    const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::strtod(le.c_str(), nullptr);
    out[route][bound] += std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

// The smallest bucket bound (seconds) under which a fraction q of the
// requests between two scrapes fell: nullopt with no requests, +inf past the
// last bucket.
std::optional<double> BucketBound(const std::map<double, double>& before, const std::map<double, double>& after,
                                  double q) {
  double total = 0;
  if (auto it = after.find(std::numeric_limits<double>::infinity()); it != after.end()) total = it->second;
  if (auto it = before.find(std::numeric_limits<double>::infinity()); it != before.end()) total -= it->second;
  if (total <= 0) return std::nullopt;
  for (const auto& [bound, count] : after) {
    auto b = before.find(bound);
    const double n = count - (b == before.end() ? 0 : b->second);
    if (n >= q * total) return bound;
  }
  return std::nullopt;
}

// The same, as the report writes it ("<= 25ms"; "n/a" with no requests).
std::string BucketQuantile(const std::map<double, double>& before, const std::map<double, double>& after, double q) {
  const std::optional<double> bound = BucketBound(before, after, q);
  if (!bound) return "n/a";
  if (std::isinf(*bound)) return "> last bucket";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "<= %gms", *bound * 1000);
  return buf;
}

std::string StepLine(const char* name, const std::vector<double>& v) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "boot-storm: %-9s n=%zu p50=%.1fms p90=%.1fms p99=%.1fms max=%.1fms", name,
                v.size(), Percentile(v, 0.5), Percentile(v, 0.9), Percentile(v, 0.99),
                v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  return buf;
}

// Sums rackgated's histograms over the appliances.
void AddHistograms(Histograms* into, const Histograms& from) {
  for (const auto& [route, buckets] : from) {
    for (const auto& [bound, count] : buckets) (*into)[route][bound] += count;
  }
}

// rackgated's write statistics on /metrics: write transactions committed and
// the writes run in them (docs/storage.md, group commit), and the round trips
// the store made (statements and transactions, reads included).
struct WriteCounts {
  double commits = 0, writes = 0, db_errors = 0, statements = 0, transactions = 0;
};

double MetricSum(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != ' ' && line[name.size()] != '{') continue;
    const size_t space = line.rfind(' ');
    sum += std::strtod(line.c_str() + space + 1, nullptr);
  }
  return sum;
}

WriteCounts ParseWriteCounts(const std::string& text) {
  return {MetricSum(text, "rackgate_db_commits_total"), MetricSum(text, "rackgate_db_writes_total"),
          MetricSum(text, "rackgate_db_errors_total"), MetricSum(text, "rackgate_db_statements_total"),
          MetricSum(text, "rackgate_db_transactions_total")};
}

// The database's own counters (pg_stat_database), read with psql: each
// statement outside a transaction is a transaction of its own, so
// transactions per machine count rackgated's round trips for reads and its
// write transactions.
struct PgStats {
  double xacts = 0, rows_written = 0, rows_read = 0;
  // pg_stat_statements' calls in this database (top-level statements; it
  // does not count transaction control run as a prepared statement, as
  // rackgated runs BEGIN and COMMIT), when the server loads it (pg-lab
  // --stat-statements); -1 otherwise.
  double statements = -1;
};

std::optional<PgStats> QueryPgStats(const std::string& database, const std::string& out) {
  if (database.rfind("postgresql://", 0) != 0 && database.rfind("postgres://", 0) != 0) return std::nullopt;
  std::string psql;
  for (const char* p : {"/usr/lib/postgresql/15/bin/psql", "/usr/bin/psql"}) {
    if (::access(p, X_OK) == 0) {
      psql = p;
      break;
    }
  }
  if (psql.empty()) return std::nullopt;
  // The URL may hold a password: it goes to psql's argv only, never to a log.
  if (Run({psql, "-X", "-A", "-t", "-q", "-d", database, "-c",
           "SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted, tup_fetched "
           "FROM pg_stat_database WHERE datname = current_database()"},
          out) != 0) {
    return std::nullopt;
  }
  std::string text = ReadFile(out);
  ::unlink(out.c_str());
  PgStats st;
  if (std::sscanf(text.c_str(), "%lf|%lf|%lf", &st.xacts, &st.rows_written, &st.rows_read) != 3) return std::nullopt;
  // Where pg_stat_statements is installed (in whichever schema: pg-lab keeps
  // it out of rackgate's); left out where it is not.
  if (Run({psql, "-X", "-A", "-t", "-q", "-d", database, "-c",
           "SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
           "WHERE e.extname = 'pg_stat_statements'"},
          out) == 0) {
    std::string schema = ReadFile(out);
    ::unlink(out.c_str());  // Spawn appends
    while (!schema.empty() && (schema.back() == '\n' || schema.back() == '\r')) schema.pop_back();
    if (!schema.empty() &&
        Run({psql, "-X", "-A", "-t", "-q", "-d", database, "-c",
             "SELECT COALESCE(sum(calls), 0) FROM " + schema +
                 ".pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"},
            out) == 0) {
      text = ReadFile(out);
      if (std::sscanf(text.c_str(), "%lf", &st.statements) != 1) st.statements = -1;
    }
  }
  ::unlink(out.c_str());
  return st;
}

// The postmaster of the PostgreSQL server behind `database` when it runs on
// this machine (its data directory, which only a superuser or
// pg_read_all_settings may read, holds postmaster.pid); nullopt otherwise.
std::optional<pid_t> LocalPostmaster(const std::string& database, const std::string& out) {
  if (database.rfind("postgresql://", 0) != 0 && database.rfind("postgres://", 0) != 0) return std::nullopt;
  for (const char* psql : {"/usr/lib/postgresql/15/bin/psql", "/usr/bin/psql"}) {
    if (::access(psql, X_OK) != 0) continue;
    if (Run({psql, "-X", "-A", "-t", "-q", "-d", database, "-c", "SELECT current_setting('data_directory')"}, out) != 0) {
      return std::nullopt;
    }
    std::string dir = ReadFile(out);
    ::unlink(out.c_str());
    while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
    std::ifstream pidfile(dir + "/postmaster.pid");
    long pid = 0;
    if (!(pidfile >> pid) || pid <= 0 || ProcessCpuSeconds(static_cast<pid_t>(pid)) < 0) return std::nullopt;
    return static_cast<pid_t>(pid);
  }
  return std::nullopt;
}

// The same storm on one appliance on SQLite, run first by this program
// itself (--reference-sqlite): its rate and rackgated's CPU per machine.
struct SqliteReference {
  double rate = 0, cpu_ms = 0;
  std::string last_line;
};

std::optional<SqliteReference> RunSqliteReference(int argc, char** argv, const std::string& out) {
  std::vector<std::string> args = {fs::read_symlink("/proc/self/exe").string()};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--appliances" || a == "--database" || a == "--database-env" || a == "--workdir" ||
        a == "--ack-log" || a == "--max-cpu-over-crypto") {
      ++i;
      continue;
    }
    if (a == "--reference-sqlite" || a == "--keep") continue;
    args.push_back(a);
  }
  std::printf("boot-storm: the SQLite reference first: one appliance, the same storm (output in %s)\n", out.c_str());
  std::fflush(stdout);
  const int rc = Run(args, out);
  SqliteReference ref;
  std::istringstream in(ReadFile(out));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("boot-storm: machines=", 0) == 0 && line.find(" rate=") != std::string::npos) {
      ref.last_line = line;
      ref.rate = std::strtod(line.c_str() + line.find(" rate=") + 6, nullptr);
    }
    if (line.rfind("boot-storm: rackgated cpu ", 0) == 0) {
      const size_t us = line.find(" us/machine");
      const size_t comma = line.rfind(", ", us);
      if (us != std::string::npos && comma != std::string::npos) ref.cpu_ms = std::strtod(line.c_str() + comma + 2, nullptr) / 1000;
    }
  }
  if (rc != 0 || ref.last_line.empty()) {
    std::printf("boot-storm: the SQLite reference failed (exit %d); see %s\n", rc, out.c_str());
    return std::nullopt;
  }
  std::printf("boot-storm: sqlite reference: %s\n", ref.last_line.substr(std::strlen("boot-storm: ")).c_str());
  std::fflush(stdout);
  return ref;
}

int Main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  ::signal(SIGPIPE, SIG_IGN);
  const auto t0 = Clock::now();

  // The working directory: state, EK CA, config, logs.
  std::string work = o.workdir;
  if (work.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/rackgate-storm.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) Die("mkdtemp failed");
    work = tmpl;
  } else {
    fs::create_directories(work);
  }
  const std::string log = work + "/commands.log";
  std::printf("boot-storm: machines=%zu concurrency=%d workdir=%s\n", o.machines, o.concurrency, work.c_str());
  std::fflush(stdout);
  std::optional<SqliteReference> reference;
  if (o.reference_sqlite) {
    reference = RunSqliteReference(argc, argv, work + "/sqlite-reference.out");
    if (!reference) Die("the SQLite reference run failed: see " + work + "/sqlite-reference.out");
  }

  std::string state = work + "/state";
  std::string admin_socket = o.socket;
  std::string ca = o.ca;
  std::vector<std::string> bases = o.urls;  // the appliances
  std::string cluster_ca_key = state + "/cluster-ca/ca.key";
  EkManufacturer mfr;
  std::string host_prefix = "node-";
  if (o.managed()) {
    RunOrDie({o.rackgatectl, "init", "--state-dir", state, "--name", "localhost", "--address", "127.0.0.1"}, log);
    RunOrDie({o.rackgatectl, "ca", "generate", "--cluster", "--state-dir", state}, log);
    mfr = EkManufacturer::Create("rackgate boot-storm lab");
    fs::create_directories(work + "/ek-roots");
    fs::create_directories(work + "/ek-intermediates");
    WriteFile(work + "/ek-roots/root.pem", mfr.root.cert_pem());
    WriteFile(work + "/ek-intermediates/intermediate.pem", mfr.intermediate.cert_pem());
    admin_socket = work + "/admin.sock";
    ca = state + "/ca/ca.crt";
  } else {
    if (!EkManufacturer::Load(o.ek_ca_dir, &mfr)) {
      mfr = EkManufacturer::Create("rackgate boot-storm lab");
      mfr.Write(o.ek_ca_dir);
      std::printf(
          "boot-storm: made a lab EK CA in %s. Add %s/root.pem to the appliance's ek_roots and\n"
          "%s/intermediate.pem to ek_intermediates, reload it (SIGHUP), and run this again.\n",
          o.ek_ca_dir.c_str(), o.ek_ca_dir.c_str(), o.ek_ca_dir.c_str());
      if (o.workdir.empty()) {
        std::error_code ec;
        fs::remove_all(work, ec);
      }
      return 0;
    }
    // Fresh hostnames: an earlier run's machines stay enrolled.
    char prefix[64];
    std::snprintf(prefix, sizeof(prefix), "storm-%lx-", static_cast<long>(std::time(nullptr)));
    host_prefix = prefix;
    cluster_ca_key.clear();
  }
  const double t_pki = Since(t0);

  // The fleet: TPM keys, EK certificates, kubelet CSRs, challenge bodies.
  const auto t1 = Clock::now();
  FleetSpec spec;
  spec.ek_type = o.ek_type;
  spec.ek_curve = o.ek_curve;
  spec.ak_type = o.ak_type;
  size_t rsa_keys = (o.ek_type == attest::kAlgRsa ? o.machines : 0) + (o.ak_type == attest::kAlgRsa ? o.machines : 0);
  spec.rsa_ak_offset = o.ek_type == attest::kAlgRsa ? o.machines : 0;
  std::unique_ptr<RsaKeyFactory> rsa;
  if (rsa_keys > 0) rsa = std::make_unique<RsaKeyFactory>(rsa_keys, 2);
  const int gen_threads = 2;
  std::vector<std::vector<SimMachine>> parts(gen_threads);
  {
    std::vector<std::thread> pool;
    const size_t per = (o.machines + gen_threads - 1) / gen_threads;
    for (int t = 0; t < gen_threads; ++t) {
      const size_t first = std::min(o.machines, per * static_cast<size_t>(t));
      const size_t count = std::min(o.machines, first + per) - first;
      pool.emplace_back([&, t, first, count] { parts[t] = MakeMachines(spec, mfr, rsa.get(), host_prefix, first, count); });
    }
    for (auto& t : pool) t.join();
  }
  std::vector<SimMachine> fleet;
  fleet.reserve(o.machines);
  for (auto& p : parts) {
    for (auto& m : p) fleet.push_back(std::move(m));
  }
  rsa.reset();
  const double t_fleet = Since(t1);

  // The inventory names each EK certificate by file: rackgatectl 0.1 takes
  // an inline base64 certificate for a path and fails on its length.
  json inventory = {{"machines", json::array()}};
  fs::create_directories(work + "/ek-certs");
  for (const auto& m : fleet) {
    WriteFile(work + "/ek-certs/" + m.hostname + ".der", std::string(m.ek_cert_der.begin(), m.ek_cert_der.end()));
    inventory["machines"].push_back(
        {{"hostname", m.hostname}, {"pool", o.pool}, {"ek_certificate", "ek-certs/" + m.hostname + ".der"}});
  }
  const std::string inventory_text = inventory.dump();
  size_t admin_body_estimate = 0;  // what rackgatectl sends: certificates in base64
  for (const auto& m : fleet) admin_body_estimate += m.hostname.size() * 2 + m.ek_cert_der.size() * 4 / 3 + 96;
  WriteFile(work + "/inventory.json", inventory_text);
  inventory = json();

  // The bundle the appliances serve (--bundle-bytes): random, so that
  // nothing along the way can compress it.
  if (o.managed() && o.bundle_bytes > 0) {
    std::string bundle(o.bundle_bytes, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(bundle.data()), static_cast<int>(bundle.size())) != 1) {
      Die("RAND_bytes failed");
    }
    WriteFile(work + "/agent-initramfs.bin", bundle);
  }

  // The appliances: one rackgated each. The first is `rackgatectl init`'s
  // state; every other one gets a copy of it (its CA, cluster CA and keys)
  // without the SQLite file, and all of them the same --database.
  std::vector<pid_t> daemons = o.pids;
  const size_t n_app = static_cast<size_t>(o.appliances);
  if (o.managed()) {
    const int c = o.concurrency;
    std::vector<std::string> logs;
    for (size_t k = 0; k < n_app; ++k) {
      const std::string suffix = k == 0 ? "" : "-" + AppName(k);
      const std::string app_state = k == 0 ? state : work + "/state" + suffix;
      if (k > 0) {
        for (const auto& entry : fs::recursive_directory_iterator(state)) {
          const fs::path rel = fs::relative(entry.path(), state);
          if (rel.filename().string().rfind("rackgate.db", 0) == 0) continue;
          if (entry.is_directory()) {
            fs::create_directories(app_state + "/" + rel.string());
          } else {
            fs::create_directories((fs::path(app_state) / rel).parent_path());
            fs::copy_file(entry.path(), fs::path(app_state) / rel, fs::copy_options::overwrite_existing);
          }
        }
      }
      const uint16_t port = FreePort();
      json config = {
          {"state_dir", app_state},
          {"listen_addresses", {"127.0.0.1"}},
          {"port", port},
          {"admin_socket", k == 0 ? admin_socket : work + "/admin" + suffix + ".sock"},
          {"ek_roots", {work + "/ek-roots"}},
          {"ek_intermediates", {work + "/ek-intermediates"}},
          {"log_level", "warn"},
          // Every machine of the storm comes from 127.0.0.1.
          {"per_client_connections", std::max(64, c + 64)},
          {"max_connections", std::max(2048, c + 256)},
          {"max_open_sessions", std::max(4096, 2 * c)},
          {"max_open_sessions_per_client", std::max(4096, 2 * c)},
          {"max_csrs_in_flight", std::max(64, c)},
          // The inventory is one request to the admin socket.
          {"admin_max_body_bytes", std::clamp<size_t>(admin_body_estimate + (1 << 20), 128u << 20, 256u << 20)},
      };
      if (o.threads > 0) config["threads"] = o.threads;
      if (!o.database.empty()) config["database"] = o.database;
      if (o.bundle_bytes > 0) config["agent_bundle"] = work + "/agent-initramfs.bin";
      for (const auto& [key, value] : o.config_overrides) {
        json v = json::parse(value, nullptr, false);
        if (v.is_discarded()) Die("--set " + key + ": not JSON: " + value);
        config[key] = v;
      }
      WriteFile(work + "/config" + suffix + ".json", config.dump(1));
      logs.push_back(work + "/rackgated" + suffix + ".log");
      daemons.push_back(Spawn({o.rackgated, "--config", work + "/config" + suffix + ".json"}, logs.back()));
      g_daemons.push_back(daemons.back());
      bases.push_back("https://127.0.0.1:" + std::to_string(port));
      // One at a time: the first creates the schema on an empty database.
      bool ready = false;
      for (int i = 0; i < 200 && !ready; ++i) {
        ready = SimpleGet(bases.back() + "/readyz", ca) == 200;
        if (!ready) {
          int status = 0;
          if (waitpid(daemons.back(), &status, WNOHANG) == daemons.back()) {
            g_daemons.pop_back();
            Die("rackgated (appliance " + AppName(k) + ") exited:\n" + ReadFile(logs.back()));
          }
          usleep(50000);
        }
      }
      if (!ready) Die("rackgated (appliance " + AppName(k) + ") did not become ready:\n" + ReadFile(logs.back()));
    }
  }
  const pid_t daemon = daemons.empty() ? 0 : daemons.front();
  const std::string base_url = bases.front();
  const std::vector<std::string> ctl = {o.rackgatectl, "--socket", admin_socket};
  auto with = [&](std::vector<std::string> args) {
    std::vector<std::string> v = ctl;
    v.insert(v.end(), args.begin(), args.end());
    return v;
  };
  WriteFile(work + "/public.ign", PublicTemplate());
  WriteFile(work + "/attested.ign", AttestedTemplate());
  if (o.managed() || Run(with({"pool", "show", o.pool}), log) != 0) {
    RunOrDie(with({"pool", "put", o.pool, "--public-template", work + "/public.ign", "--attested-template",
                   work + "/attested.ign", "--token-required", "no"}),
             log);
  }
  const auto t2 = Clock::now();
  RunOrDie(with({"import", work + "/inventory.json"}), log);
  const double t_import = Since(t2);
  std::printf("boot-storm: setup: pki %.1fs, fleet %.1fs (%s EKs, %s AKs), import of %zu machines %.1fs (%zu KB)\n",
              t_pki, t_fleet, o.ek_type == attest::kAlgRsa ? "rsa-2048" : (o.ek_curve == attest::kEccNistP384 ? "ecc-p384" : "ecc-p256"),
              o.ak_type == attest::kAlgRsa ? "rsa-2048" : "ecc-p256", o.machines, t_import, admin_body_estimate / 1024);
  std::fflush(stdout);

  // The ceiling, before the storm (again after it; the best counts).
  std::string ca_key_for_ceiling = cluster_ca_key;
  std::string scratch_ca;
  if (ca_key_for_ceiling.empty()) {
    // External appliance: its cluster CA key is not ours to read; measure
    // with a P-256 key, rackgatectl's lab CA type.
    scratch_ca = work + "/ceiling-ca.key";
    ossl::PkeyPtr k(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    LabCa tmp;
    tmp.key = std::move(k);
    WriteFile(scratch_ca, tmp.key_pem());
    ca_key_for_ceiling = scratch_ca;
  }
  // The serving key's signature is the TLS handshake's; an external
  // appliance's key is not ours to read (the P-256 key above stands in).
  const std::string serving_key_for_ceiling = o.managed() ? state + "/tls/server.key" : ca_key_for_ceiling;
  CryptoCeiling ceiling = MeasureCeiling(fleet.front(), ca_key_for_ceiling, 3, 0.1, serving_key_for_ceiling);

  std::optional<Bytes> eventlog;
  if (!o.eventlog.empty()) {
    std::string text = ReadFile(o.eventlog);
    eventlog = Bytes(text.begin(), text.end());
  }
  // The import's peak (its whole inventory is one request body, parsed at
  // once) is told apart from the storm's: VmHWM is read now and started over.
  const long setup_peak_kib = daemon > 0 ? PeakRssKib(daemon) : -1;

  // The bundle phase (--bundle-bytes): its own peak, over the RSS before it.
  std::optional<BundleStats> bundle;
  long bundle_rss0_kib = -1, bundle_peak_kib = -1;
  double bundle_cpu = -1;
  if (o.bundle_bytes > 0) {
    bundle_rss0_kib = daemon > 0 ? StatusKib(daemon, "VmRSS") : -1;
    const bool reset = daemon > 0 && ResetPeakRss(daemon);
    const double cpu0 = daemon > 0 ? ProcessCpuSeconds(daemon) : -1;
    bundle = FetchBundles(o.machines, o.concurrency, bases, ca, o.deadline);
    if (cpu0 >= 0) bundle_cpu = ProcessCpuSeconds(daemon) - cpu0;
    if (reset) bundle_peak_kib = PeakRssKib(daemon);
    const double mib = bundle->ok > 0 ? static_cast<double>(bundle->bytes) / static_cast<double>(bundle->ok) / (1 << 20)
                                      : static_cast<double>(o.bundle_bytes) / (1 << 20);
    std::printf("%s\n", StepLine("bundle", bundle->ms).c_str());
    for (const auto& [k, v] : bundle->failures) std::printf("boot-storm: bundle: failed: %s x%d\n", k.c_str(), v);
    std::printf("boot-storm: bundle phase: %zu of %zu machines fetched the %.1f MiB bundle, %d at a time, in %.1fs "
                "(%.0f/s, %.0f MiB/s)",
                bundle->ok, o.machines, mib, o.concurrency, bundle->seconds,
                bundle->seconds > 0 ? static_cast<double>(bundle->ok) / bundle->seconds : 0.0,
                bundle->seconds > 0 ? static_cast<double>(bundle->bytes) / bundle->seconds / (1 << 20) : 0.0);
    if (bundle_cpu >= 0) std::printf("; rackgated cpu %.1fs", bundle_cpu);
    if (bundle_peak_kib >= 0 && bundle_rss0_kib >= 0) {
      std::printf("; rackgated RSS %.1f MiB before, peak %.1f MiB during (+%.1f MiB; a copy per answer in flight "
                  "would be +%.0f MiB)",
                  bundle_rss0_kib / 1024.0, bundle_peak_kib / 1024.0, (bundle_peak_kib - bundle_rss0_kib) / 1024.0,
                  mib * o.concurrency);
    }
    std::printf("\n");
    std::fflush(stdout);
  }

  const long start_rss_kib = daemon > 0 ? StatusKib(daemon, "VmRSS") : -1;
  const bool hwm_reset = daemon > 0 && ResetPeakRss(daemon);
  std::vector<double> app_cpu0(n_app, -1);
  for (size_t k = 0; k < n_app && k < daemons.size(); ++k) app_cpu0[k] = daemons[k] > 0 ? ProcessCpuSeconds(daemons[k]) : -1;
  const std::optional<PgStats> pg_before = QueryPgStats(o.database, work + "/psql.out");
  const std::optional<pid_t> postmaster = LocalPostmaster(o.database, work + "/psql.out");
  const double pg_cpu0 = postmaster ? ProcessTreeCpuSeconds(*postmaster) : -1;
  const auto sys0 = SystemCpuSeconds();
  std::string metrics_text;
  Histograms server_before;
  std::vector<WriteCounts> writes_before(n_app);
  for (size_t k = 0; k < n_app; ++k) {
    metrics_text.clear();
    SimpleGet(bases[k] + "/metrics", ca, &metrics_text);
    AddHistograms(&server_before, ParseDurationHistograms(metrics_text));
    writes_before[k] = ParseWriteCounts(metrics_text);
  }
  // The client: K loops, each its own libcurl multi and TPM thread over
  // every K-th machine with its share of the concurrency, so that one client
  // thread's TLS handshakes are not what a burst of new connections waits on.
  const size_t loops_n = static_cast<size_t>(std::min(o.client_threads, std::max(1, o.concurrency)));
  std::vector<std::vector<SimMachine>> shares(loops_n);
  for (size_t i = 0; i < fleet.size(); ++i) shares[i % loops_n].push_back(std::move(fleet[i]));
  std::vector<Stats> part_stats(loops_n);
  {
    const attest::PcrValues pcrs = FleetPcrs(eventlog);
    std::vector<std::thread> loops;
    for (size_t j = 0; j < loops_n; ++j) {
      Options part = o;
      part.concurrency = o.concurrency / static_cast<int>(loops_n) + (j < static_cast<size_t>(o.concurrency) % loops_n ? 1 : 0);
      loops.emplace_back([&, j, part] {
        Storm storm(&shares[j], part, bases, ca, pcrs, eventlog, j, loops_n);
        part_stats[j] = storm.Run();
      });
    }
    for (auto& t : loops) t.join();
  }
  for (size_t i = 0; i < fleet.size(); ++i) fleet[i] = std::move(shares[i % loops_n][i / loops_n]);
  Stats s;
  for (Stats& p : part_stats) {
    for (int i = 0; i < kSteps; ++i) s.step_ms[i].insert(s.step_ms[i].end(), p.step_ms[i].begin(), p.step_ms[i].end());
    s.machine_ms.insert(s.machine_ms.end(), p.machine_ms.begin(), p.machine_ms.end());
    for (const auto& [key, v] : p.waits) s.waits[key] += v;
    for (const auto& [key, v] : p.failures) s.failures[key] += v;
    for (const auto& [key, v] : p.transport) s.transport[key] += v;
    for (const auto& [key, v] : p.moved) s.moved[key] += v;
    s.joined.resize(n_app, 0);
    for (size_t k = 0; k < p.joined.size(); ++k) s.joined[k] += p.joined[k];
    s.ok += p.ok;
    s.failed += p.failed;
    s.connections += p.connections;
    s.seconds = std::max(s.seconds, p.seconds);
    s.client_cpu = std::max(s.client_cpu, p.client_cpu);  // the process's, measured by each loop
  }
  // Each appliance's CPU during the storm (-1: not known, e.g. killed).
  std::vector<double> app_cpu(n_app, -1);
  for (size_t k = 0; k < n_app; ++k) {
    if (app_cpu0[k] < 0) continue;
    const double now = ProcessCpuSeconds(daemons[k]);
    if (now >= app_cpu0[k]) app_cpu[k] = now - app_cpu0[k];
  }
  // rackgated's CPU: the first appliance's, or all of them together.
  double daemon_cpu = app_cpu[0] >= 0 ? app_cpu[0] : 0;
  if (n_app > 1) {
    daemon_cpu = 0;
    for (double c : app_cpu) daemon_cpu += std::max(0.0, c);
  }
  const auto sys1 = SystemCpuSeconds();
  Histograms server_after;
  std::vector<std::optional<WriteCounts>> writes_after(n_app);
  for (size_t k = 0; k < n_app; ++k) {
    metrics_text.clear();
    if (SimpleGet(bases[k] + "/metrics", ca, &metrics_text) != 200) continue;
    AddHistograms(&server_after, ParseDurationHistograms(metrics_text));
    writes_after[k] = ParseWriteCounts(metrics_text);
    WriteFile(work + "/metrics" + (k == 0 ? "" : "-" + AppName(k)) + ".txt", metrics_text);
  }
  const double sys_busy = sys1.first - sys0.first;

  ceiling.KeepBest(MeasureCeiling(fleet.front(), ca_key_for_ceiling, 3, 0.1, serving_key_for_ceiling));
  const long storm_peak_kib = daemon > 0 ? PeakRssKib(daemon) : -1;
  // What VmHWM at the end would say had it never been started over.
  const long rss_kib = std::max({storm_peak_kib, hwm_reset ? setup_peak_kib : -1, bundle_peak_kib});

  if (o.managed()) StopDaemon();
  // PostgreSQL's counters: a backend reports its statistics when it ends (or
  // idles a while), so after the daemons stopped; external ones still run.
  if (!o.managed() && pg_before) sleep(2);
  std::optional<PgStats> pg_after;
  if (pg_before) pg_after = QueryPgStats(o.database, work + "/psql.out");
  // -1 when the server is gone (a failover): its CPU is then not told.
  const double pg_cpu1 = pg_cpu0 >= 0 ? ProcessTreeCpuSeconds(*postmaster) : -1;
  const double pg_cpu = pg_cpu1 >= pg_cpu0 && pg_cpu0 >= 0 ? pg_cpu1 - pg_cpu0 : -1;

  // The report.
  double worst_p50 = 0, worst_p99 = 0;
  for (int i = 0; i < kSteps; ++i) {
    std::printf("%s\n", StepLine(kStepNames[i], s.step_ms[i]).c_str());
    worst_p50 = std::max(worst_p50, Percentile(s.step_ms[i], 0.5));
    worst_p99 = std::max(worst_p99, Percentile(s.step_ms[i], 0.99));
  }
  std::printf("%s\n", StepLine("machine", s.machine_ms).c_str());
  std::optional<double> server_worst_p99;  // seconds, a bucket bound
  {
    std::string line = "boot-storm: in rackgated (request read to answer sent, /metrics buckets):";
    for (int i = 0; i < kSteps; ++i) {
      const std::string route = std::string(kStepMethods[i]) + " " + kStepPaths[i];  // rackgated's route label
      const auto& b = server_before.count(route) ? server_before.at(route) : std::map<double, double>();
      const auto& a = server_after.count(route) ? server_after.at(route) : std::map<double, double>();
      line += std::string(i ? "," : "") + " " + kStepNames[i] + " p50 " + BucketQuantile(b, a, 0.5) + " p99 " +
              BucketQuantile(b, a, 0.99);
      if (auto p99 = BucketBound(b, a, 0.99)) server_worst_p99 = std::max(server_worst_p99.value_or(0), *p99);
    }
    std::printf("%s\n", line.c_str());
  }
  for (const auto& [k, v] : s.waits) std::printf("boot-storm: waited out: %s x%d\n", k.c_str(), v);
  for (const auto& [k, v] : s.transport) std::printf("boot-storm: transport error retried: %s x%d\n", k.c_str(), v);
  for (const auto& [k, v] : s.failures) std::printf("boot-storm: failed: %s x%d\n", k.c_str(), v);
  for (const auto& [k, v] : s.moved) std::printf("boot-storm: moved to the next appliance: %s x%d\n", k.c_str(), v);
  // Several appliances, or a database: each appliance's share and cost.
  const bool fleet_report = n_app > 1 || !o.database.empty();
  const std::string backend =
      o.database.empty() || o.database.rfind("sqlite:", 0) == 0 || o.database.find("://") == std::string::npos
          ? "sqlite" : o.database.substr(0, o.database.find("://")) == "postgres" ? "postgresql"
                                                                                  : o.database.substr(0, o.database.find("://"));
  std::string cpu_per_machine;
  double total_commits = 0, total_writes = 0, total_statements = 0, total_transactions = 0;
  bool writes_known = true;
  if (fleet_report) {
    for (size_t k = 0; k < n_app; ++k) {
      const size_t joined = k < s.joined.size() ? s.joined[k] : 0;
      std::string line = "boot-storm: appliance " + AppName(k) + " (" + bases[k] + "): joined " + std::to_string(joined);
      char buf[160];
      std::string per = "?";
      if (app_cpu[k] >= 0) {
        std::snprintf(buf, sizeof(buf), ", rackgated cpu %.1fs", app_cpu[k]);
        line += buf;
        if (joined > 0) {
          std::snprintf(buf, sizeof(buf), "%.1fms", app_cpu[k] / static_cast<double>(joined) * 1000);
          per = buf;
          line += " (" + per + " per machine it joined)";
        }
      } else {
        line += ", rackgated cpu not known (no process to read: stopped or killed)";
      }
      if (writes_after[k]) {
        const double commits = writes_after[k]->commits - writes_before[k].commits;
        const double writes = writes_after[k]->writes - writes_before[k].writes;
        total_commits += commits;
        total_writes += writes;
        total_statements += writes_after[k]->statements - writes_before[k].statements;
        total_transactions += writes_after[k]->transactions - writes_before[k].transactions;
        std::snprintf(buf, sizeof(buf), ", %.0f commits, %.0f writes, %.0f database errors", commits, writes,
                      writes_after[k]->db_errors - writes_before[k].db_errors);
        line += buf;
      } else {
        writes_known = false;
        line += ", /metrics not answered at the end";
      }
      std::printf("%s\n", line.c_str());
      cpu_per_machine += (k ? "," : "") + AppName(k) + ":" + per;
    }
    if (s.ok > 0) {
      std::printf("boot-storm: database writes per machine: %.2f commits, %.2f writes (%s)\n",
                  total_commits / static_cast<double>(s.ok), total_writes / static_cast<double>(s.ok),
                  writes_known ? "every appliance's /metrics" : "the appliances that answered /metrics at the end");
      std::printf("boot-storm: database round trips per machine (the stores' own counters, %s): %.2f statements, "
                  "%.2f transactions\n",
                  backend.c_str(), total_statements / static_cast<double>(s.ok),
                  total_transactions / static_cast<double>(s.ok));
    }
    // (Counters that went down come from another server: a standby promoted.)
    const PgStats pa = pg_after.value_or(PgStats{}), pb = pg_before.value_or(PgStats{});
    if (pg_before && pg_after && s.ok > 0 && pa.xacts >= pb.xacts && pa.rows_written >= pb.rows_written) {
      const double n = static_cast<double>(s.ok);
      std::printf("boot-storm: postgresql (pg_stat_database, this storm): %.1f transactions per machine (statements "
                  "outside a transaction count one each), %.1f rows written, %.1f rows fetched per machine\n",
                  (pa.xacts - pb.xacts) / n, (pa.rows_written - pb.rows_written) / n, (pa.rows_read - pb.rows_read) / n);
      if (pa.statements >= 0 && pb.statements >= 0 && pa.statements >= pb.statements) {
        std::printf("boot-storm: postgresql (pg_stat_statements, this storm): %.2f statements per machine (top-level; "
                    "not BEGIN, COMMIT, SAVEPOINT, RELEASE sent as prepared statements, which it does not count; "
                    "boot-storm's own few psql queries too)\n",
                    (pa.statements - pb.statements) / n);
      }
    }
    if (pg_cpu >= 0 && s.ok > 0) {
      std::printf("boot-storm: postgresql server cpu %.1fs (%.1fms per machine; the postmaster's process tree, from "
                  "before the storm until the appliances stopped)\n",
                  pg_cpu, pg_cpu / static_cast<double>(s.ok) * 1e3);
    }
  } else if (n_app == 1 && writes_after[0] && s.ok > 0) {
    const double n = static_cast<double>(s.ok);
    std::printf("boot-storm: database round trips per machine (the store's own counters, %s): %.2f statements, "
                "%.2f transactions; %.2f commits, %.2f writes\n",
                backend.c_str(), (writes_after[0]->statements - writes_before[0].statements) / n,
                (writes_after[0]->transactions - writes_before[0].transactions) / n,
                (writes_after[0]->commits - writes_before[0].commits) / n,
                (writes_after[0]->writes - writes_before[0].writes) / n);
  }
  const double per_machine = ceiling.seconds_per_machine();
  const double ceiling_rate = o.cores / per_machine;
  const double rate = s.seconds > 0 ? static_cast<double>(s.ok) / s.seconds : 0;
  std::printf("boot-storm: ceiling: %s %.0f/s, %s %.0f/s, %s %.0f/s -> %.0f us/machine on one core, x%d cores = %.0f/s\n",
              ceiling.ek_op.c_str(), ceiling.ek_encrypt_per_s, ceiling.quote_op.c_str(), ceiling.quote_verify_per_s,
              ceiling.sign_op.c_str(), ceiling.cert_sign_per_s, per_machine * 1e6, o.cores, ceiling_rate);
  const double with_csr = o.cores / (per_machine + 1.0 / ceiling.csr_verify_per_s);
  std::printf("boot-storm: ceiling with the CSR's own signature check (%s %.0f/s) too: %.0f/s\n",
              ceiling.csr_op.c_str(), ceiling.csr_verify_per_s, with_csr);
  const double essential = ceiling.essential_seconds_per_machine();
  std::printf("boot-storm: essential cryptography per machine: the above, the CSR check and one TLS 1.3 server "
              "handshake's public-key work (x25519 share + derive %.0f/s, %s %.0f/s): %.0f us\n",
              ceiling.tls_kex_per_s, ceiling.tls_sign_op.c_str(), ceiling.tls_sign_per_s, essential * 1e6);
  // rackgated's CPU per joined machine, and the cost ratio against it.
  const double cpu_per_joined = daemon_cpu > 0 && s.ok > 0 ? daemon_cpu / static_cast<double>(s.ok) : 0;
  const double cost_ratio = cpu_per_joined > 0 ? essential / cpu_per_joined : 0;
  if (daemon > 0 && s.ok > 0) {
    std::printf("boot-storm: rackgated cpu %.1fs in %.1fs (%.2f cores), %.0f us/machine; client cpu %.1fs (%.2f cores)\n",
                daemon_cpu, s.seconds, daemon_cpu / s.seconds, cpu_per_joined * 1e6,
                s.client_cpu, s.client_cpu / s.seconds);
    std::printf("boot-storm: TLS connections opened by the fleet: %zu, %.2f per joined machine (%s)\n", s.connections,
                static_cast<double>(s.connections) / static_cast<double>(s.ok),
                o.share_connections ? "pooled across machines" : "one per machine, kept for its steps");
  }
  if (daemon > 0 && storm_peak_kib >= 0) {
    if (hwm_reset) {
      std::printf("boot-storm: rackgated peak RSS: %.1f MiB through setup (import), %.1f MiB at the storm's start, "
                  "%.1f MiB peak during the storm\n",
                  setup_peak_kib / 1024.0, start_rss_kib / 1024.0, storm_peak_kib / 1024.0);
    } else {
      std::printf("boot-storm: rackgated peak RSS: %.1f MiB (setup and storm together)\n", storm_peak_kib / 1024.0);
    }
  }
  std::printf("boot-storm: machine: %ld cpus, busy %.2f cores during the storm, of which other processes %.2f\n",
              sysconf(_SC_NPROCESSORS_ONLN), sys_busy / s.seconds,
              std::max(0.0, sys_busy - daemon_cpu - s.client_cpu) / s.seconds);
  std::string fleet_fields;
  if (fleet_report) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), " appliances=%zu backend=%s rackgated_cpu_per_machine=%s", n_app, backend.c_str(),
                  cpu_per_machine.c_str());
    fleet_fields = buf;
    if (pg_cpu >= 0 && s.ok > 0) {
      std::snprintf(buf, sizeof(buf), " postgres_cpu_per_machine=%.1fms", pg_cpu / static_cast<double>(s.ok) * 1e3);
      fleet_fields += buf;
    }
    if (reference) {
      std::snprintf(buf, sizeof(buf), " sqlite_rate=%.0f/s sqlite_cpu_per_machine=%.1fms ratio_vs_sqlite=%.2f",
                    reference->rate, reference->cpu_ms, reference->rate > 0 ? rate / reference->rate : 0.0);
      fleet_fields += buf;
    }
  }
  // The cost fields; with several appliances rackgated_cpu_per_machine is
  // already each one's (above), and the cost ratio is over their sum.
  std::string cost_fields;
  if (cpu_per_joined > 0) {
    char buf[256];
    if (!fleet_report) {
      std::snprintf(buf, sizeof(buf), " rackgated_cpu_per_machine=%.2fms", cpu_per_joined * 1e3);
      cost_fields += buf;
    }
    std::snprintf(buf, sizeof(buf), " essential_crypto_per_machine=%.3fms cost_ratio=%.3f", essential * 1e3,
                  cost_ratio);
    cost_fields += buf;
  }
  if (server_worst_p99) {
    char buf[64];
    if (std::isinf(*server_worst_p99)) {
      std::snprintf(buf, sizeof(buf), " rackgated_p99_le=inf");
    } else {
      std::snprintf(buf, sizeof(buf), " rackgated_p99_le=%gms", *server_worst_p99 * 1e3);
    }
    cost_fields += buf;
  }
  std::string bundle_fields;
  if (bundle) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), " bundle_mib=%.1f bundle_ok=%zu bundle_rate=%.0f/s bundle_p99=%.1fms",
                  static_cast<double>(o.bundle_bytes) / (1 << 20), bundle->ok,
                  bundle->seconds > 0 ? static_cast<double>(bundle->ok) / bundle->seconds : 0.0,
                  Percentile(bundle->ms, 0.99));
    bundle_fields = buf;
    if (bundle_peak_kib >= 0 && bundle_rss0_kib >= 0) {
      std::snprintf(buf, sizeof(buf), " bundle_rss_growth=%.1f MiB", (bundle_peak_kib - bundle_rss0_kib) / 1024.0);
      bundle_fields += buf;
    }
  }
  std::printf("boot-storm: machines=%zu ok=%zu failed=%zu rate=%.0f/s p50=%.1fms p99=%.1fms ceiling=%.0f/s ratio=%.3f "
              "peak_rss=%.1f MiB%s%s%s\n",
              o.machines, s.ok, s.failed, rate, worst_p50, worst_p99, ceiling_rate, rate / ceiling_rate,
              rss_kib >= 0 ? static_cast<double>(rss_kib) / 1024.0 : -1.0, fleet_fields.c_str(), cost_fields.c_str(),
              bundle_fields.c_str());
  std::fflush(stdout);
  bool guard_failed = false;
  if (o.max_cpu_over_crypto > 0) {
    if (cost_ratio <= 0) {
      std::printf("boot-storm: guard: FAILED: rackgated's CPU per machine is not known\n");
      guard_failed = true;
    } else {
      const double multiple = 1.0 / cost_ratio;
      guard_failed = multiple > o.max_cpu_over_crypto;
      std::printf("boot-storm: guard: rackgated's CPU per joined machine is %.2fx the essential cryptography "
                  "measured in this run; the guard allows %.2fx: %s\n",
                  multiple, o.max_cpu_over_crypto, guard_failed ? "FAILED (a regression)" : "ok");
    }
    std::fflush(stdout);
  }
  const bool bundle_failed = bundle && bundle->failed > 0;
  if (!o.keep && o.workdir.empty() && s.failed == 0 && !bundle_failed) {
    std::error_code ec;
    for (int attempt = 0; attempt < 3 && fs::exists(work, ec); ++attempt) {
      if (attempt > 0) usleep(200000);
      fs::remove_all(work, ec);
    }
    if (ec) std::fprintf(stderr, "boot-storm: cannot remove %s: %s\n", work.c_str(), ec.message().c_str());
  } else {
    std::fprintf(stderr, "boot-storm: kept %s\n", work.c_str());
  }
  curl_global_cleanup();
  return s.failed == 0 && !guard_failed && !bundle_failed ? 0 : 1;
}

}  // namespace
}  // namespace rackgate::bench

int main(int argc, char** argv) {
  try {
    return rackgate::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "boot-storm: %s\n", e.what());
    rackgate::bench::StopDaemon();
    return 1;
  }
}
