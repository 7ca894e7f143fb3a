// Progress display: tqdm-like bar redrawn in place with \r on a TTY; plain log lines when piped or under mpirun.
#include "report/progress.h"

#include "base/number_text.h"
#include "base/process_env.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>

namespace ddp {
namespace {

std::string clock_text(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const long long t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", t / 60, t % 60);
  return buf;
}

}  // namespace

ProgressMode resolve_progress_mode(ProgressMode mode, bool stdout_is_tty,
                                   const std::map<std::string, std::string>& env) {
  if (mode != ProgressMode::Auto) return mode;
  if (env.count("OMPI_COMM_WORLD_SIZE") || env.count("OMPI_COMM_WORLD_RANK")) return ProgressMode::Plain;
  return stdout_is_tty ? ProgressMode::Bar : ProgressMode::Plain;
}

Progress::Progress(ProgressMode mode, bool enabled) : enabled_(enabled) {
  mode_ = enabled ? resolve_progress_mode(mode, ::isatty(STDOUT_FILENO), process_env()) : ProgressMode::Off;
}

std::string Progress::render_bar(const StepRecord& s, double eta_s, int width) {
  const double frac = s.steps_in_epoch > 0 ? std::min(1.0, double(s.step_in_epoch) / double(s.steps_in_epoch)) : 0;
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar += std::string(static_cast<size_t>(width - filled), '.');
  auto num = [](const char* f, double v) { return std::isfinite(v) ? number_text(f, v) : std::string("-"); };
  char buf[256];
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld [%s] %lld/%lld loss %s acc %s lr %.3g scale %.3g %s samples/s ETA %s",
                static_cast<long long>(s.epoch), static_cast<long long>(s.epochs), bar.c_str(),
                static_cast<long long>(s.step_in_epoch), static_cast<long long>(s.steps_in_epoch),
                num("%.4f", s.loss).c_str(), num("%.4f", s.accuracy).c_str(), s.lr, s.loss_scale,
                num("%.0f", s.samples_per_s).c_str(), clock_text(eta_s).c_str());
  return buf;
}

void Progress::draw(const StepRecord& s, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (epoch_start_step_ < 0 || s.step_in_epoch <= 1) {
    epoch_start_ = now;
    epoch_start_step_ = s.step_in_epoch - 1;
  }
  if (!force && drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && s.step_in_epoch < s.steps_in_epoch)
    return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
  const int64_t done = s.step_in_epoch - epoch_start_step_;
  const double eta = done > 0 ? elapsed / double(done) * double(s.steps_in_epoch - s.step_in_epoch) : NAN;
  std::cout << "\r" << render_bar(s, eta) << "\x1b[K" << std::flush;
  drawn_ = true;
}

void Progress::on_step(const StepRecord& s) {
  if (mode_ != ProgressMode::Bar) return;
  StepRecord shown = s;
  shown.loss = last_.loss;
  shown.accuracy = last_.accuracy;
  shown.samples_per_s = last_.samples_per_s;
  shown.loss_scale = last_.loss_scale;
  draw(shown, false);
}

void Progress::on_log(const StepRecord& s) {
  last_ = s;
  if (mode_ == ProgressMode::Bar) {
    draw(s, true);
  } else if (mode_ == ProgressMode::Plain) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "epoch %lld/%lld step %lld/%lld loss %.4f acc %.4f lr %.6g",
                  static_cast<long long>(s.epoch), static_cast<long long>(s.epochs), static_cast<long long>(s.step),
                  static_cast<long long>(s.total_steps), s.loss, s.accuracy, s.lr);
    std::string line = buf;
    if (s.loss_scale != 1) line += " scale " + std::to_string(static_cast<long long>(s.loss_scale));
    std::snprintf(buf, sizeof buf, " samples/s %.0f", s.samples_per_s);
    std::cout << line << buf << std::endl;
  }
}

void Progress::message(const std::string& line) {
  if (mode_ == ProgressMode::Off) return;
  clear_bar();
  std::cout << line << std::endl;
}

void Progress::warning(const std::string& line) {
  if (!enabled_) return;
  clear_bar();
  std::cerr << "warning: " << line << std::endl;
}

void Progress::clear_bar() {
  if (mode_ == ProgressMode::Bar && drawn_) std::cout << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

void Progress::end_epoch() {
  if (mode_ == ProgressMode::Bar && drawn_) std::cout << std::endl;
  drawn_ = false;
  epoch_start_step_ = -1;
}

}  // namespace ddp
