// One steady-state training step of Net and ResNet-18 runs no more ATen operators and no more host reads in ddptrain
// than in bench/torch_worker.py's Python loop (bench/op_count.py counts both from LibTorch's profiler traces).
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <iostream>

namespace ddp::test {
namespace {

// The same convolutions on both sides (ddptrain's NCHW storage and full kernels, Python's plain modules), so that
// the counts compare what runs around the model: zero_grad, the loss, backward's gradient handling, the optimizer
// step and the step's figures. The figures of each side are printed; the Python script asserts the comparison.
TEST(OpCount, SteadyStateStepRunsNoMoreOperatorsOrHostReadsThanPython) {
  if (!python_has_torch()) GTEST_SKIP() << python() << " does not have torch";
  TempDir dir;
  const auto r = run_command("cd " + shell_quote(source_dir()) + " && " + python() + " bench/op_count.py --ddptrain " +
                             shell_quote(ddptrain_path()) +
                             " --ddptrain-option=--model.memory_format=contiguous"
                             " --ddptrain-option=--model.skip_padding_taps=false --diff --json " +
                             shell_quote(dir / "counts.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::cout << r.output;
  const auto check = run_command(
      python() + " -c " +
      shell_quote("import json, sys\n"
                  "rows = json.load(open(sys.argv[1]))\n"
                  "assert sorted(r['model'] for r in rows) == ['net', 'resnet18'], rows\n"
                  "for r in rows:\n"
                  "    d, p = r['ddptrain'], r['python']\n"
                  "    assert d['aten_ops'] > 100 and p['aten_ops'] > 100, r['model']\n"
                  "    assert d['aten_ops'] <= p['aten_ops'], (r['model'], d['aten_ops'], p['aten_ops'])\n"
                  "    assert d['host_reads'] <= p['host_reads'], (r['model'], d['host_reads'], p['host_reads'])\n"
                  "    print(r['model'], 'ddptrain', d['aten_ops'], d['host_reads'], 'python', p['aten_ops'],\n"
                  "          p['host_reads'])\n") +
      " " + shell_quote(dir / "counts.json"));
  EXPECT_EQ(check.exit_code, 0) << check.output;
  std::cout << check.output;
}

}  // namespace
}  // namespace ddp::test
