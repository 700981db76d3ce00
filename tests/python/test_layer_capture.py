"""Layer dumps from the Python kit (issue #17): read_dump recovers the links of the committed layer golden,
LayerCapture links a layer's cases by value, capture_layers captures one file per layer forward of a module, and
dsa-check judges each file as a chain (local + end-to-end verdicts, first divergence)."""
import os
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

import dsa_dump
from dsa_dump.h5 import read_dump

ROOT = Path(__file__).resolve().parents[2]

GOLDEN = ROOT / "golden" / "layer_v32_decode.h5"
BIN = os.environ.get("DSA_CHECK_BIN", str(ROOT / "build" / "dsa-check"))


def run_check(*files, **kw):
    return subprocess.run([BIN, "check", *map(str, files)], capture_output=True, text=True, **kw)


def dump_cases():
    """The golden layer as a kernel dump: outputs = the golden's expected/, no links (LayerCapture finds them)."""
    cases = read_dump(str(GOLDEN))
    for c in cases:
        c.outputs, c.expected, c.links = c.expected, {}, {}
        c.attrs.pop("layer", None)
    return cases


def test_read_dump_recovers_hard_and_attr_links():
    cases = {c.name: c for c in read_dump(str(GOLDEN))}
    assert cases["idx_logits"].links == {"kv_cache": "idx_kcache_store/expected/kv_cache"}
    assert cases["idx_topk"].links == {"logits": "idx_logits/expected/logits"}
    assert cases["sparse_mla_decode"].links == {"k_cache": "mla_kcache_store/expected/kv_cache",
                                                "indices": "idx_topk/expected/indices"}
    assert "from:indices" not in cases["sparse_mla_decode"].attrs
    with h5py.File(GOLDEN, "r") as f:  # same-shape links are one HDF5 object
        a = h5py.h5o.get_info(f["idx_topk/inputs/logits"].id).addr
        assert a == h5py.h5o.get_info(f["idx_logits/expected/logits"].id).addr


def test_layer_capture_links_by_value_and_checks_clean(tmp_path):
    out = tmp_path / "layer0_step1.h5"
    with dsa_dump.LayerCapture(str(out), layer=0, step=1) as lc:
        for c in dump_cases():
            lc.add(c)
    links = {c.name: c.links for c in read_dump(str(out))}
    assert links["idx_logits"] == {"kv_cache": "idx_kcache_store/outputs/kv_cache"}
    assert links["idx_topk"] == {"logits": "idx_logits/outputs/logits"}
    # [6, 64] indices read by the attention as [3, 2, 64]: bytes + attr from:, still a link
    assert links["sparse_mla_decode"]["indices"] == "idx_topk/outputs/indices"
    p = run_check(out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "layer 0 (" in p.stdout and "indexer.kcache_store -> indexer.logits_paged -> indexer.topk" in p.stdout
    assert "no divergence: all 5 cases pass locally" in p.stdout


def test_layer_capture_first_divergence_names_the_faulty_stage(tmp_path):
    cases = dump_cases()
    by = {c.name: c for c in cases}
    # The logits kernel writes one logit of row 0 wrong (a large error); its top-k consumer still gets those bytes.
    lg = np.array(by["idx_logits"].outputs["logits"], dtype=np.float32, copy=True)
    lg[0, 3] += 1000.0
    by["idx_logits"].outputs["logits"] = lg
    by["idx_topk"].inputs["logits"] = lg
    out = tmp_path / "bad.h5"
    with dsa_dump.LayerCapture(str(out), layer=7) as lc:
        for c in cases:
            lc.add(c)
    p = run_check(out)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "first divergence: indexer.logits_paged (case 'idx_logits', local FAIL)" in p.stdout


def test_a_glue_mismatch_is_an_input_problem(tmp_path):
    cases = dump_cases()
    by = {c.name: c for c in cases}
    idx = np.array(by["sparse_mla_decode"].inputs["indices"], copy=True)
    idx[0, 0, 0] = -1  # what the attention got is not what the top-k wrote
    by["sparse_mla_decode"].inputs["indices"] = idx
    by["sparse_mla_decode"].links = {"indices": "idx_topk/outputs/indices"}
    out = tmp_path / "glue.h5"
    with pytest.raises(dsa_dump.SchemaError, match="holding the bytes of idx_topk/outputs/indices") as e:
        with dsa_dump.LayerCapture(str(out)) as lc:  # the kit refuses to write that case ...
            for c in cases:
                lc.add(c)
    # ... and keeps the valid members (what was captured is never lost), saying so
    assert any("were written to" in n and "sparse_mla_decode" not in n.split("(")[1] for n in e.value.__notes__), e.value.__notes__
    assert sorted(c.name for c in dsa_dump.read_dump(str(out))) == sorted(c.name for c in cases if c.name != "sparse_mla_decode")
    out.unlink()
    with dsa_dump.LayerCapture(str(out), validate=False) as lc:  # ... and the CLI names it
        for c in cases:
            lc.add(c)
    p = run_check(out)
    assert p.returncode == 2
    assert "attr from:indices" in p.stderr and "holding the bytes of idx_topk/outputs/indices" in p.stderr


class _Kernels:
    """Stand-ins for an engine's kernels: they return the golden's outputs for the golden's inputs."""

    def __init__(self, by):
        self.by = by

    def paged_logits(self, q, kv_cache, weights, context_lens, block_table, max_context_len):
        return self.by["idx_logits"].outputs["logits"]

    def topk(self, logits, lengths, k, page_table):
        return self.by["idx_topk"].outputs["indices"]


class _FakeIndexer:
    def __init__(self, kernels, by):
        self.k, self.by = kernels, by

    def forward(self, x, layer_id):
        li = self.by["idx_logits"].inputs
        logits = self.k.paged_logits(li["q"], li["kv_cache"], li["weights"], li["context_lens"], li["block_table"],
                                     int(self.by["idx_logits"].attrs["max_context_len"]))
        ti = self.by["idx_topk"].inputs
        return self.k.topk(logits, ti["lengths"], int(self.by["idx_topk"].attrs["k"]), ti["page_table"])


def test_capture_layers_one_file_per_layer_forward(tmp_path):
    by = {c.name: c for c in dump_cases()}
    kern = _Kernels(by)
    idx = _FakeIndexer(kern, by)
    a = by["idx_topk"].attrs

    def map_logits(q, kv_cache, weights, context_lens, block_table, max_context_len, result=None):
        return dict(q=q, kv_cache=kv_cache, weights=weights, context_lens=context_lens, block_table=block_table,
                    logits=result, max_context_len=max_context_len, name="logits")

    def map_topk(logits, lengths, k, page_table, result=None):
        return dict(logits=logits, lengths=lengths, indices=result, k=k, index_base="page_slot", page_table=page_table,
                    page_size=64, rows_per_request=int(a["rows_per_request"]), name="topk")

    with dsa_dump.capture_layers(_FakeIndexer, "forward", str(tmp_path), layers={3},
                                 kernels=[(kern, "paged_logits", "indexer.logits_paged", map_logits),
                                          (kern, "topk", "indexer.topk", map_topk)]) as files:
        idx.forward(None, layer_id=2)   # not a captured layer
        idx.forward(None, layer_id=3)
        idx.forward(None, layer_id=3)
    assert [Path(f).name for f in files] == ["layer3_call00000.h5", "layer3_call00001.h5"]
    assert not isinstance(kern.topk, dsa_dump.Capture) and _FakeIndexer.forward.__name__ == "forward"  # restored
    cases = read_dump(files[0])
    assert [c.name for c in cases] == ["logits", "topk"]
    assert cases[1].links == {"logits": "logits/outputs/logits"}
    assert cases[0].attrs["layer"] == "3" and cases[0].attrs["step"] == "0"
    p = run_check(*files)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("no divergence: all 2 cases pass locally") == 2
