// Rank-0 console: a live per-epoch bar on a TTY, plain log lines otherwise, or nothing; messages and warnings.
#pragma once

#include "config/choices.h"
#include "report/reporter.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

namespace ddp {

// The display mode "auto" stands for, decided here only: plain when Open MPI started the process (OMPI_COMM_WORLD_*
// set: mpirun gives every rank a pseudo-terminal of its own even when mpirun's output goes to a file or a pipe),
// else bar when stdout is a terminal (Slurm's srun gives one only with --pty, which asks for an interactive
// terminal), else plain. Other modes are returned as given.
ProgressMode resolve_progress_mode(ProgressMode mode, bool stdout_is_tty,
                                   const std::map<std::string, std::string>& env);

class Progress {
 public:
  // Auto: resolve_progress_mode for this process. Silent unless enabled.
  Progress(ProgressMode mode, bool enabled);
  // Every optimizer step (the bar redraws at most 10 times a second, showing the last logged figures; plain prints
  // nothing here).
  void on_step(const StepRecord& s);
  // Every metrics.log_every_steps with the interval's figures filled in (plain prints a line; the bar updates).
  void on_log(const StepRecord& s);
  // A message on its own line (eval results, checkpoints): the bar is cleared first and redrawn later.
  void message(const std::string& line);
  // "warning: " + line on stderr, on rank 0 whatever the display mode (a bar is cleared first and redrawn later).
  void warning(const std::string& line);
  // Ends the current epoch's bar with a newline.
  void end_epoch();
  bool bar() const { return mode_ == ProgressMode::Bar; }
  ProgressMode mode() const { return mode_; }

  // The bar line for a step (without carriage return), `width` columns for the bar itself.
  static std::string render_bar(const StepRecord& s, double eta_s, int width = 24);

 private:
  void draw(const StepRecord& s, bool force);
  // Erases a drawn bar line, so that the next output starts on a clean line (the next step redraws the bar).
  void clear_bar();

  ProgressMode mode_ = ProgressMode::Off;
  bool enabled_ = false;  // rank 0
  bool drawn_ = false;
  StepRecord last_;  // the last logged step: its figures stay on the bar until the next log
  std::chrono::steady_clock::time_point last_draw_{}, epoch_start_{};
  int64_t epoch_start_step_ = -1;
};

}  // namespace ddp
