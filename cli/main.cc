// The `onnxptq` command. Exit codes: 0 success, 2 bad input or usage, 3 asked for something
// onnxptq does not do (ErrorKind::unsupported), 1 internal error (or, from check-npu, violations
// found; from quantize, an accuracy target not met).
#include <malloc.h>

#include <iostream>
#include <new>
#include <string>

#include "cli/commands.h"
#include "cli/mpi_ranks.h"
#include "onnxptq/onnxptq.h"

int main(int argc, char** argv) {
  // Activations of a few MB are freed and allocated again on every run: keep them on the heap
  // instead of mapping and unmapping them each time (page faults were ~10% of a run). The peak
  // memory is the same.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1024 << 20);
  CLI::App app{"onnxptq: post-training quantization of ONNX models", "onnxptq"};
  app.set_version_flag("--version", std::string("onnxptq ") + onnxptq::version());
  app.require_subcommand(1);
  app.fallthrough(false);
  onnxptq::cli::add_inspect_command(app);
  onnxptq::cli::add_run_command(app);
  onnxptq::cli::add_calibrate_command(app);
  onnxptq::cli::add_merge_stats_command(app);
  onnxptq::cli::add_quantize_command(app);
  onnxptq::cli::add_preprocess_command(app);
  onnxptq::cli::add_evaluate_command(app);
  onnxptq::cli::add_compare_command(app);
  onnxptq::cli::add_check_npu_command(app);
  onnxptq::cli::add_presets_command(app);
  onnxptq::cli::add_options_command(app);
  onnxptq::cli::add_sensitivity_command(app);
  onnxptq::cli::add_dump_model_command(app);
  onnxptq::cli::add_remove_qdq_command(app);
  onnxptq::cli::add_block_to_standard_ops_command(app);
  onnxptq::cli::add_qdq_to_qop_command(app);
  onnxptq::cli::add_fix_shapes_command(app);
  onnxptq::cli::add_a8w8_npu_to_cpu_command(app);
  onnxptq::cli::add_u16u8_to_u8u8_command(app);
  onnxptq::cli::add_bias_int32_to_int16_command(app);
  onnxptq::cli::add_lstm_to_customlstm_command(app);
  onnxptq::cli::add_fp32_to_fp16_command(app);
  onnxptq::cli::add_fp32_to_bf16_command(app);
  onnxptq::cli::add_fp16_to_bf16_command(app);

  // CLI11 reports an unknown subcommand as a missing one; name it instead.
  std::string known;
  bool is_known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    is_known = is_known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !is_known) {
    std::cerr << "error: unknown command '" << argv[1] << "' (commands: " << known << ")\n";
    return 2;
  }
  // Under mpirun, every rank runs the command; an error on one ends them all (abort_ranks), so
  // that none waits for it, and names the rank.
  auto fail = [](const std::string& message, int code) {
    const auto ranks = onnxptq::cli::command_ranks();
    // One write of the whole line: the ranks share the terminal.
    std::cerr << (ranks ? "rank " + std::to_string(ranks->rank()) + " of " + std::to_string(ranks->size()) + ": "
                        : "") +
                     message + "\n";
    onnxptq::cli::abort_ranks(code);
    return code;
  };
  try {
    if (is_known) onnxptq::cli::start_ranks(argv[1]);
    app.parse(argc, argv);  // subcommands run from their callbacks, inside parse
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      onnxptq::cli::finish_ranks();
      return app.exit(e);
    }
    return fail(std::string("error: ") + e.what() + " (see onnxptq --help)", 2);
  } catch (const onnxptq::Error& e) {
    const char* prefix = e.kind() == onnxptq::ErrorKind::internal ? "internal error: " : "error: ";
    switch (e.kind()) {
      case onnxptq::ErrorKind::bad_input:
        return fail(prefix + std::string(e.what()), 2);
      case onnxptq::ErrorKind::unsupported:
        return fail(prefix + std::string(e.what()), 3);
      case onnxptq::ErrorKind::internal:
        break;
    }
    return fail(prefix + std::string(e.what()), 1);
  } catch (const std::bad_alloc&) {
    return fail("error: out of memory", 1);
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what(), 1);
  }
  onnxptq::cli::finish_ranks();
  return onnxptq::cli::command_status();
}

int& onnxptq::cli::command_status() {
  static int status = 0;
  return status;
}
