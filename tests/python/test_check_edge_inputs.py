"""`dsa-check check` on awkward but legal (or cleanly rejected) inputs: a case name that is not UTF-8 still gives a
JSON report; int64 top-k indices are reported exactly (no trip through double); ragged offsets that cannot be
emitted as int32 indices are a schema error (exit 2) naming the tensor."""
import json
import subprocess

import h5py
import numpy as np


def topk_case(f, name, indices, offsets=None, index_base="relative"):
    g = f.create_group(name)
    g.attrs["schema_version"] = 1
    g.attrs["stage"] = "indexer.topk"
    g.attrs["k"] = 4
    g.attrs["index_base"] = index_base
    g.create_dataset("inputs/logits", data=np.array([[5, 4, 3, 2, 1, 0]], dtype=np.float32))
    g.create_dataset("inputs/lengths", data=np.array([6], dtype=np.int32))
    if offsets is not None:
        g.create_dataset("inputs/offsets", data=np.array(offsets, dtype=np.int32))
    g.create_dataset("outputs/indices", data=np.array([indices]))
    return g


def test_json_report_with_non_utf8_case_name(tmp_path, dsa_check_bin):
    p = tmp_path / "latin1.h5"
    with h5py.File(p, "w") as f:
        topk_case(f, "ok", np.array([0, 1, 2, 3], dtype=np.int32))
        f.move("ok", b"case\xe9")  # an HDF5 link name in Latin-1 (not UTF-8), as a C or Fortran writer may produce
    out = tmp_path / "r.json"
    r = subprocess.run([str(dsa_check_bin), "check", str(p), "--json", str(out)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert b"case\\xe9/outputs/indices" in r.stdout  # the invalid byte shown as \xe9 on the console (one line, valid UTF-8)
    r.stdout.decode("utf-8")
    rep = json.loads(out.read_text(encoding="utf-8"))
    assert "case\ufffd" in json.dumps(rep, ensure_ascii=False)  # the invalid byte became U+FFFD
    assert not list(tmp_path.glob(".r.json.tmp*"))


def test_int64_indices_are_reported_exactly(tmp_path, run_cli):
    p = tmp_path / "i64.h5"
    big = 2**62 + 5  # not representable in double: a trip through double would print 4611686018427387904
    with h5py.File(p, "w") as f:
        topk_case(f, "t", np.array([0, 1, 2, big], dtype=np.int64))
    r = run_cli("check", str(p))
    assert r.returncode == 1, r.stdout + r.stderr
    assert str(big) in r.stdout, r.stdout


def test_ragged_offsets_must_fit_int32_indices(tmp_path, run_cli):
    for offs in ([-3], [2**31 - 3]):
        p = tmp_path / f"off{offs[0]}.h5"
        with h5py.File(p, "w") as f:
            topk_case(f, "t", np.array([0, 1, 2, 3], dtype=np.int32), offsets=offs, index_base="ragged_offset")
        r = run_cli("inspect", str(p))
        assert r.returncode == 2
        assert "inputs/offsets" in r.stderr and "< 2^31" in r.stderr, r.stderr


def test_control_characters_in_names_cannot_forge_lines(tmp_path, dsa_check_bin):
    """A case named "x\nerror: forged" prints as one line with \x0a, in the console, the error lines and JUnit XML."""
    import xml.dom.minidom
    p = tmp_path / "forged.h5"
    with h5py.File(p, "w") as f:
        topk_case(f, "ok", np.array([0, 1, 2, 3], dtype=np.int32))
        f.move("ok", "x\nerror: forged\x1b[31m")
        bad = topk_case(f, "bad", np.array([0, 1, 2, 3], dtype=np.int32))
        bad.attrs["k"] = 0
        f.move("bad", "y\rerror: forged")
    junit = tmp_path / "r.xml"
    r = subprocess.run([str(dsa_check_bin), "check", str(p), "--junit", str(junit)], capture_output=True, timeout=60)
    assert r.returncode == 2
    for line in (r.stdout + r.stderr).decode("utf-8").splitlines():
        assert not line.startswith("error: forged"), line
        assert "\x1b" not in line
    assert b"x\\x0aerror: forged\\x1b[31m/outputs/indices" in r.stdout
    assert b"case 'y\\x0derror: forged': attr k: expected > 0, found 0" in r.stderr
    xml.dom.minidom.parse(str(junit))  # well-formed


def _torch_topk_file(p, logits, lengths, picks, dtype="float32", **attrs):
    with h5py.File(p, "w") as f:
        g = f.create_group("t")
        g.attrs["schema_version"] = 1
        g.attrs["stage"] = "indexer.topk"
        g.attrs["k"] = picks.shape[1]
        for k, v in attrs.items():
            g.attrs[k] = v
        if dtype == "bf16":
            import ml_dtypes
            d = g.create_dataset("inputs/logits", data=np.asarray(logits, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))
            d.attrs["dtype"] = "bf16"
        else:
            g.create_dataset("inputs/logits", data=np.asarray(logits, np.float32))
        g.create_dataset("inputs/lengths", data=np.asarray(lengths, np.int32))
        g.create_dataset("outputs/indices", data=picks.astype(np.int64))


def test_torch_topk_conventions(tmp_path, run_cli):
    """torch.topk(masked_logits, k, sorted=True) on a row shorter than k returns the len valid picks, then -inf
    columns: accepted with short_rows=torch fast_path=0 (fp32 and bf16 logits); by default the message names the
    attrs to set."""
    ninf = -np.inf
    logits = np.array([[0.5, 2.0, 1.0, ninf, ninf, ninf], [3.0, 1.0, 2.0, 0.0, -1.0, 4.0]], np.float32)
    torch_picks = np.array([[1, 2, 0, 3, 4], [5, 0, 2, 1, 3]])  # what torch.topk returns (the -inf ties by index)
    for dtype in ("float32", "bf16"):
        p = tmp_path / f"torch_{dtype}.h5"
        _torch_topk_file(p, logits, [3, 6], torch_picks, dtype=dtype, sorted=1, fast_path=0, short_rows="torch")
        r = run_cli("check", str(p))
        assert r.returncode == 0, r.stdout + r.stderr
    p = tmp_path / "torch_default.h5"
    _torch_topk_file(p, logits, [3, 6], torch_picks, sorted=1)
    r = run_cli("check", str(p))
    assert r.returncode == 1 and "STRUCTURE" in r.stdout
    assert "set attrs short_rows=torch fast_path=0" in r.stdout or "set attr fast_path=0" in r.stdout, r.stdout
    p = tmp_path / "torch_contradiction.h5"
    _torch_topk_file(p, logits, [3, 6], torch_picks, sorted=1, short_rows="torch")
    r = run_cli("check", str(p))
    assert r.returncode == 2 and "attr fast_path: expected 0 with short_rows=torch" in r.stderr, r.stderr
    # A real picking error in a short row is still caught: index 0 (score 0.5) must be in, not a -inf column.
    p = tmp_path / "torch_wrong.h5"
    _torch_topk_file(p, logits, [3, 6], np.array([[1, 2, 3, 4, 5], [5, 0, 2, 1, 3]]), sorted=1, fast_path=0, short_rows="torch")
    r = run_cli("check", str(p))
    assert r.returncode == 1, r.stdout


def test_absolute_indices_in_a_relative_case_get_the_index_base_hint(tmp_path, run_cli):
    """An engine that emits absolute columns (row_start + p) where the case declares relative positions: the invalid
    indices are candidates under index_base=absolute, and the message says so."""
    logits = np.full((1, 20), -5.0, np.float32)
    logits[0, 10:14] = [4.0, 3.0, 2.0, 1.0]
    p = tmp_path / "abs_in_rel.h5"
    with h5py.File(p, "w") as f:
        g = f.create_group("t")
        g.attrs["schema_version"] = 1
        g.attrs["stage"] = "indexer.topk"
        g.attrs["k"] = 2
        g.create_dataset("inputs/logits", data=logits)
        g.create_dataset("inputs/lengths", data=np.array([4], np.int32))
        g.create_dataset("inputs/row_starts", data=np.array([10], np.int32))
        g.create_dataset("outputs/indices", data=np.array([[10, 11]], np.int32))
    r = run_cli("check", str(p))
    assert r.returncode == 1 and "STRUCTURE" in r.stdout
    assert "every invalid index is a candidate under index_base=absolute (wrong index base?)" in r.stdout, r.stdout


def test_wrong_output_dtype_is_one_verdict_whether_or_not_the_schema_allows_it(tmp_path, dsa_check_bin):
    """A kernel output of the wrong dtype is a check failure (verdict DTYPE, exit 1, expected and found named), both
    for a dtype the stage's schema never allows (float32 indices) and for one it allows but the case does not (int32
    indices are fine for top-k, a bf16 logits output where the case asks for float32): never an input error."""
    p = tmp_path / "dt.h5"
    with h5py.File(p, "w") as f:
        topk_case(f, "float_indices", np.array([0, 1, 2, 3], dtype=np.float32))
        topk_case(f, "good", np.array([0, 1, 2, 3], dtype=np.int32))
    out = tmp_path / "r.json"
    r = subprocess.run([str(dsa_check_bin), "check", str(p), "--json", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    res = {x["case"]: x for x in json.loads(out.read_text())["results"] if x["group"] == "outputs"}
    assert res["float_indices"]["verdict"] == "DTYPE" and "dtype float32, reference has int32" in res["float_indices"]["message"]
    assert res["good"]["verdict"] == "BITEXACT"
    # the same verdict where the schema allows the dtype but the case does not
    g = tmp_path / "golden"
    g.mkdir()
    subprocess.run([str(dsa_check_bin), "golden", "--case", "ragged_chunked_prefill", "--out", str(g)], check=True,
                   capture_output=True, timeout=300)
    with h5py.File(g / "ragged_chunked_prefill.h5", "r+") as f:
        c = f[next(iter(f))]
        lg = c["expected/logits"][()].astype(np.float32)
        c.create_dataset("outputs/logits", data=(lg.view(np.uint32) >> 16).astype(np.uint16)).attrs["dtype"] = "bf16"
    r = subprocess.run([str(dsa_check_bin), "check", str(g / "ragged_chunked_prefill.h5"), "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    res = [x for x in json.loads(out.read_text())["results"] if x["group"] == "outputs"]
    assert res[0]["verdict"] == "DTYPE" and "dtype bf16, reference has float32" in res[0]["message"], res[0]
