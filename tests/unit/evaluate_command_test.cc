// The user's metric command of the accuracy-target search: the score is the last line of its
// output; every way it can fail is an error naming the trial, the command and its last output.
#include "accuracy/evaluate_command.h"

#include <gtest/gtest.h>

#include "support/one_node.h"

namespace onnxptq::accuracy {
namespace {

using testing::error_of;

TEST(EvaluateCommand, TheScoreIsTheLastLineAndTheModelPathIsQuoted) {
  // A path with a space and a quote reaches the command as one argument, where {model} stands.
  std::string model = "/tmp/a dir/it's.onnx";
  CommandScore s = run_evaluate_command("printf 'loading\\n%s\\n  0.8125 \\n\\n' {model}", model, 10, "trial 1");
  EXPECT_EQ(s.value, 0.8125);
  EXPECT_GE(s.seconds, 0);
  // Without {model}, the path is the last argument.
  EXPECT_EQ(run_evaluate_command("f() { [ \"$1\" = \"/tmp/a dir/it's.onnx\" ] && echo -3.5e-2; }; f", model, 10, "t").value,
            -0.035);
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(EvaluateCommand, FailuresNameTheTrialTheCommandAndItsLastOutput) {
  EXPECT_EQ(error_of([] { run_evaluate_command("echo reading; echo broken >&2; exit 3", "m.onnx", 10, "trial 4"); }),
            "trial 4: the evaluate command `echo reading; echo broken >&2; exit 3 'm.onnx'` failed with exit status 3; "
            "its last output: 'reading | broken'");
  EXPECT_EQ(error_of([] { run_evaluate_command("echo accuracy: 0.5", "m.onnx", 10, "trial 2"); }),
            "trial 2: the evaluate command `echo accuracy: 0.5 'm.onnx'` printed no number as its last line; its last "
            "output: 'accuracy: 0.5 m.onnx'");
  EXPECT_NE(error_of([] { run_evaluate_command("true", "m.onnx", 10, "t"); }).find("printed no number"), std::string::npos);
  EXPECT_NE(error_of([] { run_evaluate_command("echo nan #", "m.onnx", 10, "t"); }).find("printed no number"),
            std::string::npos);
  EXPECT_NE(error_of([] { run_evaluate_command("kill -9 $$", "m.onnx", 10, "t"); }).find("died by signal 9"),
            std::string::npos);
  EXPECT_NE(error_of([] { run_evaluate_command("no_such_program_here #", "m.onnx", 10, "t"); }).find("exit status 127"),
            std::string::npos);
}

// A command that hangs, with a child that would keep the output open, is stopped at its limit
// (were they left running, this test would wait a minute for the output to close).
TEST(EvaluateCommand, AHangingCommandIsStoppedWithItsChildren) {
  std::string e = error_of([] { run_evaluate_command("echo started; sleep 60 & sleep 60 #", "m.onnx", 0.5, "trial 7"); });
  EXPECT_EQ(e, "trial 7: the evaluate command `echo started; sleep 60 & sleep 60 # 'm.onnx'` ran past its limit of 0.5 s "
               "and was stopped; its last output: 'started'");
}

}  // namespace
}  // namespace onnxptq::accuracy
