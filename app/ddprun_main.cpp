// ddprun: the launcher binary's main: its command line, --help, and the exit code of a usage error or a failure.
#include "base/c10_logging.h"
#include "base/first_line.h"
#include "base/process_env.h"
#include "launcher/command_line.h"
#include "launcher/ddprun.h"
#include "launcher/flags.h"
#include "launcher/output.h"
#include "launcher/process.h"

#include <iostream>

int main(int argc, char** argv) {
  using namespace ddp;
  quiet_c10_logging();
  try {
    const LaunchOptions o =
        parse_launch_args(std::vector<std::string>(argv + 1, argv + argc), this_node(), process_env());
    if (o.help) {
      std::cout << launch_usage();
      return 0;
    }
    return launch_job(o, resolve_program(o.program[0]));
  } catch (const LaunchUsageError& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    launcher_log("error: " + first_line(e.what()));
    return 1;
  }
}
