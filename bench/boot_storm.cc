// boot-storm: a fleet of simulated machines booting at once against a real
// rackgated over HTTPS on loopback. Each machine has a software TPM
// (attest/testing/soft_tpm.h: EK and AK in OpenSSL, ActivateCredential and
// quotes producing the bytes a TPM produces) and runs the whole node path:
//   1. POST /v1/attest/challenge   (EK public, EK certificate, AK public)
//   2. ActivateCredential + quote, POST /v1/attest/evidence  -> token
//   3. GET /v1/machine/config      (the attested Ignition config)
//   4. POST /v1/machine/csr        (kubelet client CSR, ECDSA P-256)
// C machines are in flight at once, driven by one libcurl multi loop (HTTP
// keep-alive, connections reused) and one thread doing the TPMs' work. A
// 503/429 with Retry-After is waited out without blocking anyone else, and
// the machine tries again (from the challenge for the attestation steps); it
// fails only at the overall deadline or on a final refusal.
//
// The ceiling: the appliance's own cryptography per machine, measured with
// OpenSSL in the same run (docs/performance.md, "boot-storm"). Last line:
//   boot-storm: machines=N ok=N failed=F rate=R/s p50=Xms p99=Yms ceiling=C/s ratio=Z peak_rss=M MiB
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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
#include "bench/storm_pki.h"
#include "core/secrets.h"
#include "wire/codec.h"
#include "wire/protocol.h"

extern char** environ;

namespace rackgate::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr char kUsage[] =
    "Usage: boot-storm --machines N --concurrency C\n"
    "                  (--rackgated PATH --rackgatectl PATH\n"
    "                   | --url URL --ca FILE --rackgatectl PATH --socket ADMIN_SOCKET --ek-ca-dir DIR [--pid PID])\n"
    "                  [--ek rsa|ecc|ecc384] [--ak ecc|rsa] [--eventlog FILE] [--deadline SECONDS]\n"
    "                  [--threads N] [--client-threads N] [--cores N] [--pool NAME] [--set KEY=JSON] [--keep] [--workdir DIR]\n"
    "\n"
    "A boot storm: N simulated machines with software TPMs, C at a time, each running\n"
    "challenge, evidence, attested config and kubelet client CSR against rackgated.\n"
    "\n"
    "With --rackgated/--rackgatectl the benchmark sets everything up itself in a temp\n"
    "dir: `rackgatectl init`, a lab EK CA (root + intermediate) the config trusts,\n"
    "`rackgatectl ca generate --cluster`, a pool with public and attested templates,\n"
    "one `rackgatectl import` of all N machines, and rackgated with raised limits and\n"
    "log_level warn (2 threads unless --threads).\n"
    "With --url, an appliance already runs: the EK CA lives in --ek-ca-dir (made there\n"
    "on the first run, which then stops so that an operator can add DIR/root.pem to\n"
    "ek_roots and DIR/intermediate.pem to ek_intermediates); machines are enrolled\n"
    "through --socket with fresh hostnames; --pid names the daemon for its peak RSS.\n"
    "\n"
    "  --ek        the TPMs' EK: rsa (RSA-2048, default), ecc (P-256), ecc384 (P-384)\n"
    "  --ak        the AK: ecc (P-256 ECDSA, default, as rackgate-agent) or rsa (RSASSA)\n"
    "  --eventlog  a binary TCG event log every machine sends; its replay is the PCRs\n"
    "  --deadline  seconds after which unfinished machines count as failed (600)\n"
    "  --client-threads  client loops, each with its own libcurl multi and TPM thread (1)\n"
    "  --cores     cores the ceiling is scaled to (2)\n"
    "  --ack-log   append a line per acknowledged step (evidence HOST, config HOST\n"
    "              SHA256, csr HOST SERIAL), written before the next step starts:\n"
    "              the crash test checks each against the database\n"
    "  --set       a rackgated config key for this run, e.g. --set max_open_sessions=100\n"
    "  --keep      keep the working directory (state, logs, inventory) afterwards\n"
    "Last line: boot-storm: machines=N ok=N failed=F rate=R/s p50=Xms p99=Yms\n"
    "           ceiling=C/s ratio=Z peak_rss=M MiB\n";

struct Options {
  size_t machines = 2000;
  int concurrency = 200;
  int client_threads = 1;  // independent libcurl loops (and TPM threads), C split between them
  std::string rackgated, rackgatectl;
  std::string url, ca, socket, ek_ca_dir;
  pid_t pid = 0;
  std::string pool = "storm";
  uint16_t ek_type = attest::kAlgRsa;
  uint16_t ek_curve = attest::kEccNistP256;
  uint16_t ak_type = attest::kAlgEcc;
  std::string eventlog;
  double deadline = 600;
  int threads = 2;
  int cores = 2;
  bool keep = false;
  std::string workdir;
  std::string ack_log;  // every 200 the appliance acknowledged, a line each
  std::vector<std::pair<std::string, std::string>> config_overrides;  // --set KEY=JSON
  bool managed() const { return !rackgated.empty(); }
};

// The rackgated this benchmark started, stopped on every way out.
pid_t g_daemon = 0;

void StopDaemon() {
  if (g_daemon <= 0) return;
  ::kill(g_daemon, SIGTERM);
  int status = 0;
  while (waitpid(g_daemon, &status, 0) < 0 && errno == EINTR) {
  }
  g_daemon = 0;
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

// utime + stime of a process, seconds.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  std::getline(f, s);
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::strtod(field.c_str(), nullptr);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
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
};

struct Stats {
  std::vector<double> step_ms[kSteps];
  std::vector<double> machine_ms;
  std::map<std::string, int> waits;     // 503/429 answers waited out, by step and reason
  std::map<std::string, int> failures;  // machines failed, by reason
  std::map<std::string, int> transport; // transport errors retried
  size_t ok = 0, failed = 0;
  double seconds = 0;
  double client_cpu = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

std::string ErrorReason(const std::string& body) {
  auto e = wire::DecodeErrorBody(body);
  return e.ok() && !e->reason.empty() ? e->reason : "?";
}

class Storm {
 public:
  Storm(std::vector<SimMachine>* fleet, const Options& o, std::string base_url, std::string ca,
        attest::PcrValues pcrs, std::optional<Bytes> eventlog)
      : fleet_(fleet), o_(o), base_(std::move(base_url)), ca_(std::move(ca)), pcrs_(std::move(pcrs)),
        eventlog_(std::move(eventlog)) {}

  Stats Run() {
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
        curl_multi_remove_handle(multi_, f->easy);
        const double ms = Since(f->request_start) * 1000;
        const Step step = f->step;
        if (rc != CURLE_OK) {
          ++stats_.transport[std::string(kStepNames[step]) + " " + curl_easy_strerror(rc)];
          retry(f, step <= kEvidence ? kChallenge : step, 1.0);
          continue;
        }
        long status = 0;
        curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status == 503 || status == 429) {
          curl_off_t after = 0;
          curl_easy_getinfo(f->easy, CURLINFO_RETRY_AFTER, &after);
          ++stats_.waits[std::string(kStepNames[step]) + " " + std::to_string(status) + " " + ErrorReason(f->response)];
          retry(f, step <= kEvidence ? kChallenge : step, after > 0 ? static_cast<double>(after) : 1.0);
          continue;
        }
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
            Ack("evidence " + f->m->hostname);
            Start(f, kConfig);
            break;
          }
          case kConfig: {
            json j = json::parse(f->response, nullptr, false);
            if (!j.is_object() || !j.contains("ignition")) {
              finish(f, "config answer is not an Ignition config");
              break;
            }
            Ack("config " + f->m->hostname + " " + core::Sha256Hex(f->response));
            Start(f, kCsr);
            break;
          }
          case kCsr: {
            auto issued = wire::DecodeIssuedCertificate(f->response);
            if (!issued.ok()) {
              finish(f, "csr answer without a certificate");
              break;
            }
            Ack("csr " + f->m->hostname + " " + issued->serial);
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
  // process, is what the crash test kills).
  void Ack(const std::string& line) {
    if (o_.ack_log.empty()) return;
    if (!ack_) ack_ = std::fopen(o_.ack_log.c_str(), "a");
    if (!ack_) Die("cannot open " + o_.ack_log);
    std::fprintf(ack_, "%s\n", line.c_str());
    std::fflush(ack_);
  }

  const Options& o_;
  std::FILE* ack_ = nullptr;
  const std::string base_;
  const std::string ca_;
  const attest::PcrValues pcrs_;
  const std::optional<Bytes> eventlog_;
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
      o.url = need(i);
    } else if (a == "--ca") {
      o.ca = fs::absolute(need(i)).string();
    } else if (a == "--socket") {
      o.socket = need(i);
    } else if (a == "--ek-ca-dir") {
      o.ek_ca_dir = fs::absolute(need(i)).string();
    } else if (a == "--pid") {
      o.pid = static_cast<pid_t>(std::stol(need(i)));
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
    } else if (a == "--workdir") {
      o.workdir = fs::absolute(need(i)).string();
    } else if (a == "--ack-log") {
      o.ack_log = need(i);
    } else {
      std::fprintf(stderr, "boot-storm: unknown argument '%s'\n\n%s", a.c_str(), kUsage);
      std::exit(2);
    }
  }
  const bool managed = !o.rackgated.empty();
  const bool external = !o.url.empty();
  if (managed == external || o.rackgatectl.empty() || o.machines == 0 || o.concurrency <= 0 ||
      (external && (o.ca.empty() || o.socket.empty() || o.ek_ca_dir.empty()))) {
    std::fprintf(stderr, "boot-storm: give --rackgated and --rackgatectl, or --url, --ca, --rackgatectl, --socket "
                         "and --ek-ca-dir\n\n%s", kUsage);
    std::exit(2);
  }
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

// The smallest bucket bound under which a fraction q of the requests between
// two scrapes fell, in ms ("n/a" with no requests).
std::string BucketQuantile(const std::map<double, double>& before, const std::map<double, double>& after, double q) {
  double total = 0;
  if (auto it = after.find(std::numeric_limits<double>::infinity()); it != after.end()) total = it->second;
  if (auto it = before.find(std::numeric_limits<double>::infinity()); it != before.end()) total -= it->second;
  if (total <= 0) return "n/a";
  for (const auto& [bound, count] : after) {
    auto b = before.find(bound);
    const double n = count - (b == before.end() ? 0 : b->second);
    if (n >= q * total) {
      if (std::isinf(bound)) return "> last bucket";
      char buf[32];
      std::snprintf(buf, sizeof(buf), "<= %gms", bound * 1000);
      return buf;
    }
  }
  return "n/a";
}

std::string StepLine(const char* name, const std::vector<double>& v) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "boot-storm: %-9s n=%zu p50=%.1fms p90=%.1fms p99=%.1fms max=%.1fms", name,
                v.size(), Percentile(v, 0.5), Percentile(v, 0.9), Percentile(v, 0.99),
                v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  return buf;
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

  std::string state = work + "/state";
  std::string admin_socket = o.socket;
  std::string ca = o.ca;
  std::string base_url = o.url;
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

  // The appliance.
  pid_t daemon = o.pid;
  uint16_t port = 0;
  if (o.managed()) {
    port = FreePort();
    const int c = o.concurrency;
    json config = {
        {"state_dir", state},
        {"listen_addresses", {"127.0.0.1"}},
        {"port", port},
        {"admin_socket", admin_socket},
        {"ek_roots", {work + "/ek-roots"}},
        {"ek_intermediates", {work + "/ek-intermediates"}},
        {"log_level", "warn"},
        {"threads", o.threads},
        // Every machine of the storm comes from 127.0.0.1.
        {"per_client_connections", std::max(64, c + 64)},
        {"max_connections", std::max(2048, c + 256)},
        {"max_open_sessions", std::max(4096, 2 * c)},
        {"max_open_sessions_per_client", std::max(4096, 2 * c)},
        {"max_csrs_in_flight", std::max(64, c)},
        // The inventory is one request to the admin socket.
        {"admin_max_body_bytes", std::clamp<size_t>(admin_body_estimate + (1 << 20), 128u << 20, 256u << 20)},
    };
    for (const auto& [key, value] : o.config_overrides) {
      json v = json::parse(value, nullptr, false);
      if (v.is_discarded()) Die("--set " + key + ": not JSON: " + value);
      config[key] = v;
    }
    WriteFile(work + "/config.json", config.dump(1));
    daemon = Spawn({o.rackgated, "--config", work + "/config.json"}, work + "/rackgated.log");
    g_daemon = daemon;
    base_url = "https://127.0.0.1:" + std::to_string(port);
    bool ready = false;
    for (int i = 0; i < 200 && !ready; ++i) {
      ready = SimpleGet(base_url + "/readyz", ca) == 200;
      if (!ready) {
        int status = 0;
        if (waitpid(daemon, &status, WNOHANG) == daemon) Die("rackgated exited:\n" + ReadFile(work + "/rackgated.log"));
        usleep(50000);
      }
    }
    if (!ready) Die("rackgated did not become ready:\n" + ReadFile(work + "/rackgated.log"));
  }
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
  CryptoCeiling ceiling = MeasureCeiling(fleet.front(), ca_key_for_ceiling, 3, 0.1);

  std::optional<Bytes> eventlog;
  if (!o.eventlog.empty()) {
    std::string text = ReadFile(o.eventlog);
    eventlog = Bytes(text.begin(), text.end());
  }
  // The import's peak (its whole inventory is one request body, parsed at
  // once) is told apart from the storm's: VmHWM is read now and started over.
  const long setup_peak_kib = daemon > 0 ? PeakRssKib(daemon) : -1;
  const long start_rss_kib = daemon > 0 ? StatusKib(daemon, "VmRSS") : -1;
  const bool hwm_reset = daemon > 0 && ResetPeakRss(daemon);
  const double daemon_cpu0 = daemon > 0 ? ProcessCpuSeconds(daemon) : 0;
  const auto sys0 = SystemCpuSeconds();
  std::string metrics_text;
  SimpleGet(base_url + "/metrics", ca, &metrics_text);
  const Histograms server_before = ParseDurationHistograms(metrics_text);
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
        Storm storm(&shares[j], part, base_url, ca, pcrs, eventlog);
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
    s.ok += p.ok;
    s.failed += p.failed;
    s.seconds = std::max(s.seconds, p.seconds);
    s.client_cpu = std::max(s.client_cpu, p.client_cpu);  // the process's, measured by each loop
  }
  const double daemon_cpu = daemon > 0 ? ProcessCpuSeconds(daemon) - daemon_cpu0 : 0;
  const auto sys1 = SystemCpuSeconds();
  metrics_text.clear();
  SimpleGet(base_url + "/metrics", ca, &metrics_text);
  const Histograms server_after = ParseDurationHistograms(metrics_text);
  WriteFile(work + "/metrics.txt", metrics_text);
  const double sys_busy = sys1.first - sys0.first;

  CryptoCeiling after = MeasureCeiling(fleet.front(), ca_key_for_ceiling, 3, 0.1);
  ceiling.ek_encrypt_per_s = std::max(ceiling.ek_encrypt_per_s, after.ek_encrypt_per_s);
  ceiling.quote_verify_per_s = std::max(ceiling.quote_verify_per_s, after.quote_verify_per_s);
  ceiling.csr_verify_per_s = std::max(ceiling.csr_verify_per_s, after.csr_verify_per_s);
  ceiling.cert_sign_per_s = std::max(ceiling.cert_sign_per_s, after.cert_sign_per_s);
  const long storm_peak_kib = daemon > 0 ? PeakRssKib(daemon) : -1;
  // What VmHWM at the end would say had it never been started over.
  const long rss_kib = std::max(storm_peak_kib, hwm_reset ? setup_peak_kib : -1);

  if (o.managed()) StopDaemon();

  // The report.
  double worst_p50 = 0, worst_p99 = 0;
  for (int i = 0; i < kSteps; ++i) {
    std::printf("%s\n", StepLine(kStepNames[i], s.step_ms[i]).c_str());
    worst_p50 = std::max(worst_p50, Percentile(s.step_ms[i], 0.5));
    worst_p99 = std::max(worst_p99, Percentile(s.step_ms[i], 0.99));
  }
  std::printf("%s\n", StepLine("machine", s.machine_ms).c_str());
  {
    std::string line = "boot-storm: in rackgated (request read to answer sent, /metrics buckets):";
    for (int i = 0; i < kSteps; ++i) {
      const std::string route = std::string(kStepMethods[i]) + " " + kStepPaths[i];  // rackgated's route label
      const auto& b = server_before.count(route) ? server_before.at(route) : std::map<double, double>();
      const auto& a = server_after.count(route) ? server_after.at(route) : std::map<double, double>();
      line += std::string(i ? "," : "") + " " + kStepNames[i] + " p50 " + BucketQuantile(b, a, 0.5) + " p99 " +
              BucketQuantile(b, a, 0.99);
    }
    std::printf("%s\n", line.c_str());
  }
  for (const auto& [k, v] : s.waits) std::printf("boot-storm: waited out: %s x%d\n", k.c_str(), v);
  for (const auto& [k, v] : s.transport) std::printf("boot-storm: transport error retried: %s x%d\n", k.c_str(), v);
  for (const auto& [k, v] : s.failures) std::printf("boot-storm: failed: %s x%d\n", k.c_str(), v);
  const double per_machine = ceiling.seconds_per_machine();
  const double ceiling_rate = o.cores / per_machine;
  const double rate = s.seconds > 0 ? static_cast<double>(s.ok) / s.seconds : 0;
  std::printf("boot-storm: ceiling: %s %.0f/s, %s %.0f/s, %s %.0f/s -> %.0f us/machine on one core, x%d cores = %.0f/s\n",
              ceiling.ek_op.c_str(), ceiling.ek_encrypt_per_s, ceiling.quote_op.c_str(), ceiling.quote_verify_per_s,
              ceiling.sign_op.c_str(), ceiling.cert_sign_per_s, per_machine * 1e6, o.cores, ceiling_rate);
  const double with_csr = o.cores / (per_machine + 1.0 / ceiling.csr_verify_per_s);
  std::printf("boot-storm: ceiling with the CSR's own signature check (%s %.0f/s) too: %.0f/s\n",
              ceiling.csr_op.c_str(), ceiling.csr_verify_per_s, with_csr);
  if (daemon > 0 && s.ok > 0) {
    std::printf("boot-storm: rackgated cpu %.1fs in %.1fs (%.2f cores), %.0f us/machine; client cpu %.1fs (%.2f cores)\n",
                daemon_cpu, s.seconds, daemon_cpu / s.seconds, daemon_cpu / static_cast<double>(s.ok) * 1e6,
                s.client_cpu, s.client_cpu / s.seconds);
  }
  if (daemon > 0) {
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
  std::printf("boot-storm: machines=%zu ok=%zu failed=%zu rate=%.0f/s p50=%.1fms p99=%.1fms ceiling=%.0f/s ratio=%.3f "
              "peak_rss=%.1f MiB\n",
              o.machines, s.ok, s.failed, rate, worst_p50, worst_p99, ceiling_rate, rate / ceiling_rate,
              rss_kib >= 0 ? static_cast<double>(rss_kib) / 1024.0 : -1.0);
  std::fflush(stdout);
  if (!o.keep && o.workdir.empty() && s.failed == 0) {
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
  return s.failed == 0 ? 0 : 1;
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
