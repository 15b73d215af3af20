"""The suite's environment: no test depends on the terminal of whoever runs it.

pytest-xdist's workers (make test runs two) inherit COLUMNS=80; a user's shell may set COLUMNS or
LINES too. The commands size their tables from these, so the tests run without them, as in a CI log.
"""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import settings

# No wall-clock budget per example: hypothesis' default deadline (200 ms) fails a test on a loaded
# CI machine, not on a defect.
settings.register_profile("gpubench", deadline=None)
settings.load_profile("gpubench")

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

# pytest-xdist's workers ignore SIGINT (execnet); the Ctrl-C tests need Python's own handler, as
# in a user's process.
signal.signal(signal.SIGINT, signal.default_int_handler)

# The modules that run many real `gpubench run`s go first, so that `make test`'s processes
# (pytest-xdist, a file each) end together instead of waiting on one long file at the end.
HEAVY_FIRST = (  # longest first (make test --durations on an idle 2-core machine)
    "test_multigpu.py",
    "test_reliability.py",
    "test_slurm.py",  # a real Slurm job, cancelled and resumed (with GPUBENCH_TEST_SLURM=1)
    "test_families.py",
    "test_run_e2e.py",
    "test_parity_e2e.py",
    "test_workflow.py",
    "test_required.py",
    "test_launcher.py",
    "test_llm.py",
    "test_history_store.py",
    "test_engines.py",
    "test_input_classes.py",
    "test_hook.py",
    "test_history_cli.py",
    "test_predict_cli.py",
    "test_readme.py",
    "test_report_cli.py",
    "test_run_cli.py",
)


# The second tier (`heavy`: `make test-heavy`, run by .ci/run after `make test`): the modules and
# tests whose real multi-process or multi-run subprocesses cost tens of seconds each on a 2-core
# machine, so that `make test` stays under 5 minutes there. Nothing here is skipped: .ci/run runs both.
HEAVY_MODULES = (
    "test_multigpu.py",
    "test_mesh.py",
    "test_reliability.py",
    "test_slurm.py",
    "test_parity_e2e.py",
    "test_data_e2e.py",
    "test_workflow.py",
    "test_required.py",
    "test_launcher.py",
    "test_llm.py",
    "test_readme.py",
    "test_run_e2e.py",  # the quick matrix end to end (make run), and what it writes
    "test_recommend_e2e.py",  # recommend on llama-tiny and vit-tiny, and the certificate rerun
    "test_orphans.py",  # gpubench SIGKILLed under each launcher
)
HEAVY_TESTS = (
    "test_verify_cli.py::test_a_verify_stopped_by_its_time_limit_is_finished_by_resume",
    "test_families.py::test_models_gpubench_has_no_code_for_train_as_their_own_task",
    "test_families.py::test_a_model_table_in_the_matrix_trains_with_random_weights",
    "test_history_store.py::test_a_resaved_results_csv_is_the_same_run_and_a_changed_value_another",
    "test_input_classes.py::test_resume_refuses_a_results_file_with_a_hand_added_column",
    "test_hook.py::test_run_cmd_times_the_loop_as_a_scenario",
    "test_hook.py::test_commands_that_fail_are_rows_with_a_status_and_their_reason",
    "test_hook.py::test_the_hook_refuses_a_nested_step_and_an_os_exit_says_so",
    "test_hook.py::test_torchrun_ranks_that_disagree_or_fail_are_named",
    "test_hook.py::test_the_lightning_callback_times_a_lightning_2_fit",
    "test_fit.py::test_fit_on_the_cpu_brackets_the_largest_batch_with_real_probes",
    "test_help.py::test_every_help_example_runs_as_shown",
    "test_inputs.py::test_compare_thresholds_are_finite_and_bounded",
    "test_accum_curve.py::test_every_engine_records_the_models_loss_undivided_under_accumulation",
    "test_accum_curve.py::test_an_accumulated_rows_curve_starts_where_the_one_batch_row_does",
    "test_compare_cli.py::test_a_cpu_run_compared_with_its_rerun_exits_0",
    "test_mlflow.py::test_export_logs_each_scenario_with_the_stored_figures_and_skips_it_the_second_time",
    "test_mlflow.py::test_run_with_mlflow_logs_the_run_it_just_made",
    "test_lora_targets.py::test_lora_on_gpt2_trains_and_its_row_names_the_adapted_layers",
    "test_engine_override.py::test_run_keeps_a_scenarios_own_engine_and_says_so",
    "test_verify_cli.py::test_verify_on_the_cpu_measures_speed_claims_as_a_smoke_test",
    "test_verify_cli.py::test_a_claim_that_does_not_hold_exits_1_and_says_so",
    "test_verify_cli.py::test_the_guides_arithmetic_claims_run_for_real_on_the_cpu",
    "test_secrets.py::test_a_recorded_run_keeps_no_password_in_env_json_report_or_logs",
    "test_checkpoint_every.py::test_it_trains_on_the_cpu_and_its_predicted_peak_lies_between_none_and_every_layer",
    # test_record's three tests of one real DINOv2 + ConvNeXt run (~40 s on 2 cores), and torchvision's
    # every engine: `make test` ran 4 min 4 s to 4 min 52 s on a 2-core VM, too close to its 5 minutes
    "test_record.py::test_a_vision_transformers_tokens_are_its_patches_and_class_token_not_seq_len",
    "test_record.py::test_a_cnn_has_no_tokens_and_its_flops_are_counted_from_the_built_model",
    "test_record.py::test_a_run_of_two_models_has_a_model_column_and_no_change_across_models",
    "test_torchvision.py::test_every_engine_trains_the_tiny_preset_with_torchvision",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if item.path.name in HEAVY_MODULES or name in HEAVY_TESTS:
            item.add_marker(pytest.mark.heavy)

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return HEAVY_FIRST.index(name) if name in HEAVY_FIRST else len(HEAVY_FIRST)

    items.sort(key=rank)  # stable: each module keeps its own order
