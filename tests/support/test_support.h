// Test helpers: paths of the built binaries and sources, temp dirs, running commands and reading files.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ddp::test {

std::string source_dir();  // repository root
std::string binary_dir();  // CMake build dir (holds ddptrain, ddprun)
std::string ddptrain_path();
// The project venv's python (torch 2.11, torchvision, tensorboard) behind ddptest_python, which runs each script or
// -c code in a child forked from a server that imported torch and torchvision once (tests/support/python_fork);
// DDP_TEST_PYTHON overrides, DDP_PYTHON_FORK=0 runs the interpreter itself.
std::string python();
// python() has `modules` ("torch, torchvision", dotted names too) installed: found on its path, not imported (a
// broken install then fails the oracle the test runs, not the check). With DDP_REQUIRE_ORACLES=1 (scripts/test) a
// missing module is also a test failure, so an oracle test cannot pass by skipping.
bool python_has_modules(const std::string& modules, const std::string& interpreter = python());
// The MLflow test venv's python (tests/requirements-mlflow.txt, made by scripts/setup and linked as .venv-mlflow);
// DDP_TEST_MLFLOW_PYTHON overrides.
std::string mlflow_python();
bool python_has_torch();          // python_has_modules("torch")
std::string fashion_mnist_dir();  // DDP_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist
// Whether fashion_mnist_dir() holds Fashion-MNIST; without it, a test failure where the oracles are required.
bool have_fashion_mnist();
bool built_with_libcurl();        // ddptrain reads URLs (CMake DDP_WITH_DOWNLOAD)
std::string mnist_fixture_dir();  // tests/fixtures/mnist: the real MNIST test split (t10k images and labels)

// A fresh empty directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

// Runs a shell command line (bash -c), capturing stdout+stderr.
CommandResult run_command(const std::string& command_line);
// Quotes one argument for bash.
std::string shell_quote(const std::string& s);

// The message of the std::runtime_error that f throws; a test failure (and "") when it throws none.
std::string error_of(const std::function<void()>& f);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);
// How many times `what` occurs in `text` (overlapping ones included).
size_t count_of(const std::string& text, const std::string& what);
// Lines of a text file.
std::vector<std::string> read_lines(const std::string& path);

// The lines of a run's output that hold "warning", each with its newline, less those that follow the machine rather
// than the job: the straggler verdicts ("warning: straggler: ..."), as any rank of a multi-rank run on a busy machine
// can fall 20% behind the others for three log intervals, and the CPU's lack of an autocast dtype's instructions
// (amp/autocast.h's cpu_autocast_warning for this CPU, as the trainer words it).
std::string warnings_of_the_job(const std::string& output);

// A free TCP port on 127.0.0.1, below the ephemeral range (outgoing connections cannot take it before use).
int free_port();
// Whether `port` on 127.0.0.1 can be bound now.
bool port_is_free(int port);

// Small MNIST-format dataset written as IDX files into dir (train n_train, test n_test), deterministic from seed.
void write_tiny_mnist(const std::string& dir, int n_train, int n_test, int seed);
// CIFAR-10's six binary batch files in dir: per_train_file records in each of data_batch_1..5.bin, n_test in
// test_batch.bin; each class a colour (learnable), plus noise.
void write_tiny_cifar10(const std::string& dir, int per_train_file, int n_test, int seed);
// Tiny MNIST (400 training samples) in dir/data and the classic Net's first weights (make_net_init.py, seed 11) in
// dir/init.pt: what the tests against Python DDP start from.
void write_data_and_net_init(const TempDir& dir);

// dir/cfg.toml for a job on the MNIST-format set in data_dir: data.dataset = "mnist", data.dir = data_dir, plus
// `keys` ("section.key=value", grouped by section in the order given; a value that is not a number or a boolean is
// written as a TOML string). Returns the config's path.
std::string write_mnist_job(const TempDir& dir, const std::string& data_dir, const std::vector<std::string>& keys);
// The same on a tiny set written into dir/data first (write_tiny_mnist).
// Shell prefix that runs a command as on another host as far as shared memory goes: in its own pid and mount
// namespace, with its own /proc and an empty tmpfs on /dev/shm (no process outside can open its files there or
// through /proc/PID/fd, nor it theirs). Needs root; own_host_allowed() says whether this machine lets it.
std::string as_own_host();
bool own_host_allowed();

std::string write_tiny_job(const TempDir& dir, int n_train, int n_test, int data_seed,
                           const std::vector<std::string>& keys);

struct RankResult {
  int exit_code = -1;
  std::string output;
};

// The shard pattern `ddptrain --make-shards` printed for `split` ("train" or "val") in `output`; "" when it printed
// none.
std::string made_shard_pattern(const std::string& output, const std::string& split);

// The last line of any rank's output (ranks in order) that contains `text`; "" when none does.
std::string rank_line_with(const std::vector<RankResult>& ranks, const std::string& text);

// Starts world_size ddptrain processes (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT set as torchrun
// would) with `args`, waits for all, returns each rank's exit code and output. extra_env: "K=V K2=V2"; cwd: the
// folder they run in ("" = this process's); rank_prefix: a command each rank runs under, by rank ("taskset -c 1").
std::vector<RankResult> run_ranks(int world_size, const std::string& args, const std::string& extra_env = "",
                                  int threads_per_rank = 1, const std::string& cwd = "",
                                  const std::vector<std::string>& rank_prefix = {});

// Runs `python_args` (a script and its arguments, after the venv's python) as `world_size` Python ranks the way
// torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; one thread each) and waits for all.
CommandResult run_python_ranks(int world_size, const std::string& python_args);

// Runs `ddprun ARGS` (ARGS ending in a ddptrain command whose job.out_dir is `out`) in the background, waits until
// out/metrics.jsonl logs step `kill_at` and a checkpoint's manifest is in out/checkpoints (a background save,
// serialised at idle priority, may end steps after its step on a busy machine), SIGKILLs one worker (a child of
// ddprun), and waits for ddprun: the output ends in "rc N" (ddprun's exit status); ddprun's own output goes to out +
// ".log".
CommandResult run_ddprun_killing_a_worker(const std::string& args, const std::string& out, int kill_at);

// Saves torchvision.models.<model>(num_classes=...) initialised under torch.manual_seed(seed) as a plain state dict.
CommandResult save_torchvision_init(const std::string& path, const std::string& model, int num_classes, int seed);

// Max |a - b| over all entries of two state-dict files (throws if keys or shapes differ).
double max_state_diff(const std::string& path_a, const std::string& path_b);

// The entry of two state-dict files farthest apart measured against its own scale: |a - b| / max(1, max |b|) (a
// BatchNorm running variance far above 1 carries float32 rounding of its own size).
struct ScaledStateDiff {
  std::string name;
  double abs = 0;       // max |a - b| in that entry
  double scale = 0;     // max |b| in that entry
  double relative = 0;  // abs / max(1, scale)
};
ScaledStateDiff largest_scaled_state_diff(const std::string& path_a, const std::string& path_b);

}  // namespace ddp::test
