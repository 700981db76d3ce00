"""The CLI meets a new user: an unknown subcommand is named with the known ones (exit 2, also with --help after
it), every subcommand's --help shows one example, and `dsa-check stages NAME` shows one stage with what it
computes (issue #36 item 4 and the new-user trial's `stages NAME`)."""
import json

import pytest

SUBCOMMANDS = ("stages", "inspect", "validate", "golden", "check", "merge", "report", "selftest", "cut", "backend-diff",
               "expect")


@pytest.mark.parametrize("args", [("nosuchcmd",), ("nosuchcmd", "--help"), ("nosuchcmd", "x.h5")])
def test_unknown_subcommand_is_named_with_the_known_ones(run_cli, args):
    p = run_cli(*args, check_rc=2)
    assert "unknown subcommand 'nosuchcmd'" in p.stderr, p.stderr
    assert all(s in p.stderr for s in SUBCOMMANDS), p.stderr
    assert "did you mean" not in p.stderr


def test_a_near_miss_is_suggested(run_cli):
    p = run_cli("chek", "dump.h5", check_rc=2)
    assert "unknown subcommand 'chek' (did you mean check?)" in p.stderr, p.stderr


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_help_shows_an_example(run_cli, sub):
    p = run_cli(sub, "--help", check_rc=0)
    assert "Example:" in p.stdout and f"dsa-check {sub}" in p.stdout.split("Example:")[1], p.stdout


def test_top_level_help_shows_an_example(run_cli):
    p = run_cli("--help", check_rc=0)
    assert "Example:" in p.stdout and "dsa-check golden --demo" in p.stdout


def test_stages_name_shows_the_formula(run_cli):
    p = run_cli("stages", "indexer.logits_ragged", check_rc=0)
    assert p.stdout.startswith("indexer.logits_ragged"), p.stdout
    assert "computes: logits[i,j] = fl32( kv_scale[j] * sum_h W[i,h] * relu(q[i,h,:] . kv[j,:]) )" in p.stdout
    assert "indexer.topk" not in p.stdout and "kernel profiles" not in p.stdout  # only the named stage


def test_stages_unknown_name_is_exit_2_with_the_known_ones(run_cli):
    p = run_cli("stages", "indexer.logit_ragged", check_rc=2)
    assert "unknown stage 'indexer.logit_ragged' (did you mean indexer.logits_ragged?)" in p.stderr, p.stderr
    assert "attn.sparse_mla_decode" in p.stderr


def test_every_stage_says_what_it_computes(run_cli):
    stages = json.loads(run_cli("stages", "--json", check_rc=0).stdout)["stages"]
    assert stages and all(len(s["formula"]) > 40 for s in stages), [s["name"] for s in stages if len(s["formula"]) <= 40]
    one = json.loads(run_cli("stages", "--json", "indexer.topk", check_rc=0).stdout)["stages"]
    assert [s["name"] for s in one] == ["indexer.topk"]


def test_a_missing_attr_of_a_plugin_case_names_what_it_has():
    from dsa_dump.pytest_plugin import CaseAttrs

    a = CaseAttrs({"k": 4, "sorted": 0}, "case 'c' of g.h5 (stage indexer.topk)")
    assert a["k"] == 4 and a.get("topk") is None
    with pytest.raises(KeyError, match=r"case 'c' of g.h5 \(stage indexer.topk\) has no attr 'topk'; its attrs: k, sorted"):
        a["topk"]


def test_version_names_the_backends_and_needs_no_cuda_runtime_library(run_cli, dsa_check_bin):
    """New-user trial: the binary must run on a machine without CUDA. A CUDA build links the runtime statically
    (no libcudart.so needed; the driver is looked up only for --backend cuda); --version says which backends."""
    import shutil
    import subprocess

    v = run_cli("--version", check_rc=0).stdout
    assert "backends: cpu" in v, v
    if shutil.which("ldd") is None:
        pytest.skip("skipped: no ldd on this machine")
    libs = subprocess.run(["ldd", str(dsa_check_bin)], capture_output=True, text=True).stdout
    assert "libcudart" not in libs and "libcuda.so" not in libs, libs
