"""Nothing from a model becomes code (issue 14, "Code generated from model text").

One model whose value names, node names, graph name, doc strings, producer, metadata, page labels
and file name are hostile (quotes, triple quotes, newlines, `$(...)`, backticks, `</script>`, NUL
where the format allows it) goes through every generator: `reduce`, `web build`, `package rpi`
and `package mobile`. The generated Python parses and, imported, runs nothing; the generated shell
parses with `sh -n`, runs (with stub pythons) without running the model's text, and carries that
text only quoted; the page's HTML is the asset as shipped and its JSON manifest escapes `<`, `>`
and `&`. A model whose op type or domain is not a plain identifier is refused with InvalidGraph
by both loaders, the checker, the config reader and writer, and reduce.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxedge import checker, ir, model_io
from onnxedge.errors import InvalidArgument, InvalidGraph
from onnxedge.reduced_build import scan, wheel
from onnxedge.reduced_build.build import reduce

SENTINEL = "PWNED"
# what the model's text carries: Python and shell code, a script end, a NUL, a % format
EVIL = ('e"""\'\'\'\n__import__("os").system("touch %s")\n"""$(touch %s)`touch %s`'
        '</script><script>x</script>&amp;\\\x00 %%(op)s {0}' % (SENTINEL, SENTINEL, SENTINEL))
# a file name may hold neither "/" nor NUL
EVIL_FILE = "m'\"$(touch %s)`touch %s`;<b>&|%%(op)s.onnx" % (SENTINEL, SENTINEL)
LABELS = ["zero " + EVIL, "</script>", "one"]


def _hostile_model(path: str, op: str = "Relu", domain: str = "") -> str:
    """A two-node MLP (Gemm, Relu) with hostile names and metadata, saved as .onnx at `path`."""
    x, w, b, h, y = ("in " + EVIL, "w " + EVIL, "b " + EVIL, "h " + EVIL, "out " + EVIL)
    rng = np.random.RandomState(0)
    nodes = [helper.make_node("Gemm", [x, w, b], [h], name="gemm " + EVIL, doc_string=EVIL),
             helper.make_node(op, [h], [y], name="relu " + EVIL, domain=domain)]
    graph = helper.make_graph(
        nodes, "graph " + EVIL, [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), w),
         numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), b)], doc_string=EVIL)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name=EVIL,
                              producer_version=EVIL, doc_string=EVIL)
    model.ir_version = 8
    helper.set_model_props(model, {EVIL: EVIL, "onnxedge.page": json.dumps({"labels": LABELS})})
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> str:
    return _hostile_model(str(tmp_path_factory.mktemp("hostile") / EVIL_FILE))


def _no_sentinel(*folders: str) -> None:
    for folder in folders:
        for dirpath, _, names in os.walk(folder):
            assert SENTINEL not in names, "model text ran: %s/%s exists" % (dirpath, SENTINEL)


def _strings(tree: ast.AST) -> list:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def check_wheel_python(whl: str, tmp: str, named: bool = True) -> None:
    """Every .py of the wheel parses; its op_modules.py names the model file (when `named`) only in
    string constants (none in the docstring); importing op_modules.py runs nothing of the model's text."""
    site = os.path.join(tmp, "site")
    zipfile.ZipFile(whl).extractall(site)
    for dirpath, _, names in os.walk(site):
        for name in names:
            if name.endswith(".py"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    ast.parse(f.read(), name)
    index = os.path.join(site, "onnxedge", "kernels", "op_modules.py")
    with open(index, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    doc = ast.get_docstring(tree) or ""
    assert "$(" not in doc and "%(op)s" not in doc
    hint = [s for s in _strings(tree) if "onnxedge reduce" in s]
    assert len(hint) == 1
    assert not named or shlex.quote(EVIL_FILE).replace("%", "%%") in hint[0], hint
    ns: dict = {}
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        with open(index, encoding="utf-8") as f:
            exec(compile(f.read(), index, "exec"), ns)   # what the slim wheel's registry imports
    finally:
        os.chdir(cwd)
    assert ns["REQUIRED_OPS"] and all(checker.op_identifier_error(d, o) is None
                                      for d, o in ns["REQUIRED_OPS"])
    _no_sentinel(tmp)


def test_reduce_of_a_hostile_model(hostile, tmp_path):
    out = str(tmp_path / "out")
    r = reduce([hostile], out)
    stem = EVIL_FILE[:-len(".onnx")]
    assert list(r.models) == [stem]
    check_wheel_python(r.wheel, str(tmp_path))
    with open(r.config, encoding="utf-8") as f:
        text = f.read()
    assert scan.parse_config(text) == scan.required_operators(r.models[stem], None)
    assert all(re.match(r"[\w.]+;\d+;[\w,]+\Z", l) for l in text.splitlines()
               if not l.startswith("#")), text
    loaded = model_io.load(r.models[stem])
    assert loaded.metadata_props[EVIL] == EVIL and loaded.graph.inputs[0].name == "in " + EVIL
    _no_sentinel(str(tmp_path))


def test_reduce_refuses_a_file_name_with_control_characters(tmp_path):
    path = _hostile_model(str(tmp_path / "m\n$(touch PWNED).onnx"))
    with pytest.raises(InvalidArgument, match="control characters"):
        reduce([path], str(tmp_path / "out"))


def test_web_build_of_a_hostile_model(hostile, tmp_path):
    from onnxedge.web import bundle as web
    out = str(tmp_path / "dist")
    b = web.build_bundle([hostile], out, pyodide="https://example.invalid/pyodide/",
                         providers="cpu", title="t " + EVIL, progress=None)
    for name in web.ASSET_FILES:   # the page is the asset as shipped: nothing pasted into it
        with open(os.path.join(web.ASSETS, name), "rb") as f, \
                open(os.path.join(out, name), "rb") as g:
            assert f.read() == g.read(), name
    with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
        html = f.read()
    assert html.lower().count("<script") == html.lower().count("</script>")
    with open(os.path.join(out, web.MANIFEST), encoding="utf-8") as f:
        text = f.read()
    assert not set("<>&") & set(text), "bundle.json must escape <, > and &"
    manifest = json.loads(text)
    [entry] = manifest["models"]
    assert manifest["title"] == "t " + EVIL
    assert entry["metadata"][EVIL] == EVIL and entry["page"] == {"labels": LABELS}
    assert entry["inputs"][0]["name"] == "in " + EVIL and entry["outputs"][0]["name"] == "out " + EVIL
    check_wheel_python(b.wheel, str(tmp_path))


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    return True


def _fake_pi_wheels(folder: str) -> str:
    os.makedirs(folder)
    for name in ("numpy-2.4.6-cp311-cp311-manylinux_2_28_aarch64.whl",
                 "flatbuffers-25.12.19-py2.py3-none-any.whl", "pip-26.3-py3-none-any.whl"):
        open(os.path.join(folder, name), "wb").close()
    return folder


# stands in for the Pi's python: answers the version query, makes a venv holding itself, and
# accepts pip and the final import check
STUB_PYTHON = """#!/bin/sh
case "$1" in
  -c) echo 3.11 ;;
  -m) for last in "$@"; do :; done; mkdir -p "$last/bin" && cp "$0" "$last/bin/python" ;;
  *) echo "[stub python] $*" ;;
esac
"""


@pytest.mark.parametrize("file_name", [EVIL_FILE, "m$(touch %s).onnx" % SENTINEL])
def test_package_rpi_of_a_hostile_model(file_name, tmp_path):
    from onnxedge.edge.rpi import bundle as rpi
    hostile = _hostile_model(str(tmp_path / file_name))
    out = str(tmp_path / "pi")
    b = rpi.make_bundle([hostile], out, wheels_dir=_fake_pi_wheels(str(tmp_path / "wh")),
                        neon=False)
    install = os.path.join(out, "install.sh")
    assert subprocess.run(["sh", "-n", install]).returncode == 0
    # install.sh runs (stub pythons, no systemd) without running the model's text
    stub = tmp_path / "python3.11"
    stub.write_text(STUB_PYTHON)
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    prefix = str(tmp_path / "opt" / "onnxedge")
    env = dict(os.environ, PATH=str(tmp_path) + os.pathsep + os.environ["PATH"])
    env.pop("ONNXEDGE_EMULATOR", None)
    proc = subprocess.run(["sh", install, "--prefix", prefix, "--no-systemd", "--python", str(stub)],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=60)
    _no_sentinel(str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the model's file in the bundle has a plain name, the one install.sh and the unit use
    [safe] = os.listdir(os.path.join(out, "models"))
    assert re.match(r"[A-Za-z0-9_][A-Za-z0-9._-]*\.oxe\Z", safe), safe
    assert os.listdir(os.path.join(prefix, "models")) == [safe]
    with open(os.path.join(prefix, "onnxedge.service"), encoding="utf-8") as f:
        assert "serve %s/models/%s --host" % (prefix, safe) in f.read()
    check_wheel_python(b.wheel, str(tmp_path), named=False)
    with open(install, encoding="utf-8") as f:
        script = f.read()
    assert "MODEL=%s\n" % safe in script and "`touch" not in script and "$(touch" not in script
    with open(os.path.join(out, "onnxedge.service"), encoding="utf-8") as f:
        unit = f.read()
    [cmd] = re.findall(r"^ExecStart=(.*)$", unit, re.M)
    assert shlex.split(cmd)[2] == "/opt/onnxedge/models/" + safe and "$" not in unit
    # the README's curl example: the request body is one shell word, JSON naming the real input
    with open(os.path.join(out, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    [curl] = re.findall(r"^curl -s -X POST .*\\\n.*$", readme, re.M)
    argv = shlex.split(curl.replace("\\\n", " "))
    body = argv[argv.index("-d") + 1]
    assert list(json.loads(body.replace("[...]", "[]"))["inputs"]) == ["in " + EVIL]
    # a prefix that would break the sed command or the unit is refused
    proc = subprocess.run(["sh", install, "--prefix", prefix + "|x\nExecStartPre=/bin/id",
                           "--no-systemd", "--python", str(stub)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "--prefix may hold only" in proc.stderr, proc.stderr


def test_package_rpi_refuses_control_characters_and_bad_options(tmp_path):
    from onnxedge.edge.rpi import bundle as rpi
    wheels = _fake_pi_wheels(str(tmp_path / "wh"))
    path = _hostile_model(str(tmp_path / "m\nExecStartPre=id.onnx"))
    with pytest.raises(InvalidArgument, match="control characters"):
        rpi.make_bundle([path], str(tmp_path / "a"), wheels_dir=wheels, neon=False)
    good = _hostile_model(str(tmp_path / "good.onnx"))
    with pytest.raises(InvalidArgument, match="not a version"):
        rpi.make_bundle([good], str(tmp_path / "b"), python="3.11\n$(id)", wheels_dir=wheels,
                        neon=False)
    with pytest.raises(InvalidArgument, match="not a port"):
        rpi.make_bundle([good], str(tmp_path / "c"), port="80\nExecStartPre=id",  # type: ignore
                        wheels_dir=wheels, neon=False)


def test_package_mobile_of_a_hostile_model(hostile, tmp_path):
    from onnxedge.edge.mobile import package as mobile
    p = mobile.make_package([hostile], str(tmp_path / "pkg"), "android")
    stem = EVIL_FILE[:-len(".onnx")]
    with open(p.manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    assert list(manifest["models"]) == [stem]
    with open(os.path.join(p.folder, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    [code] = re.findall(r"```python\n(.*?)```", readme, re.S)
    call = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)
            and getattr(n.func, "attr", "") == "session"]
    assert [a.value for a in call[0].args] == ["path/to/this/folder", stem]
    rest = readme[readme.index("`InferenceSession(") + len("`InferenceSession("):]
    first = next(rest[:i] for i in range(1, len(rest)) if rest[i] == "," and _literal(rest[:i]))
    assert ast.literal_eval(first) == "models/%s.oxe" % stem
    check_wheel_python(p.wheel, str(tmp_path))
    _no_sentinel(str(tmp_path))


# ------------------------------------------------------------------ op types and domains

BAD_OPS = [('Relu"""\nimport os\n"""', ""), ("Relu\nai.onnx;17;Cos", ""), ("", ""),
           ("Relu", 'com.x"""'), ("Relu", "ai.onnx;1;X"), ("1Relu", ""), ("Re-lu", ""),
           ("Relu", "ai..onnx")]


@pytest.mark.parametrize("op, domain", BAD_OPS)
def test_onnx_loader_refuses_a_hostile_op_type(op, domain, tmp_path):
    path = _hostile_model(str(tmp_path / "m.onnx"), op=op, domain=domain)
    with pytest.raises(InvalidGraph) as e:
        model_io.load(path)
    text = op if checker.is_domain(domain) else domain
    assert "node 1" in str(e.value) and repr(text) in str(e.value), str(e.value)
    with pytest.raises(InvalidGraph):
        reduce([path], str(tmp_path / "out"))


def _ir_model(op: str, domain: str = "", in_subgraph: bool = False) -> ir.Model:
    """An IR whose one node (or the one node of an If branch) has op type `op`."""
    f32 = ir.TypeInfo.tensor(1, [2])
    body = ir.Graph("then", [ir.Node(op, ["x"], ["t"], domain=domain, name="inner")], [],
                    [ir.ValueInfo("t", f32)])
    if in_subgraph:
        node = ir.Node("If", ["c"], ["y"], {"then_branch": body, "else_branch": body}, name="if")
        inputs = [ir.ValueInfo("x", f32), ir.ValueInfo("c", ir.TypeInfo.tensor(9, []))]
    else:
        node = ir.Node(op, ["x"], ["y"], domain=domain, name="evil")
        inputs = [ir.ValueInfo("x", f32)]
    graph = ir.Graph("g", [node], inputs, [ir.ValueInfo("y", f32)])
    return ir.Model(graph, {"": 17, domain: 1} if domain else {"": 17})


@pytest.mark.parametrize("in_subgraph", [False, True])
@pytest.mark.parametrize("op, domain", BAD_OPS[:2] + BAD_OPS[3:4])
def test_oxe_reader_and_checker_refuse_a_hostile_op_type(op, domain, in_subgraph, tmp_path):
    model = _ir_model(op, domain, in_subgraph)
    path = str(tmp_path / "m.oxe")
    model_io.save(model, path)   # the writer trusts its IR: the reader must not
    text = op if checker.is_domain(domain) else domain
    with pytest.raises(InvalidGraph) as e:
        model_io.load(path)
    assert repr(text) in str(e.value) and "node 0" in str(e.value), str(e.value)
    with pytest.raises(InvalidGraph):
        checker.check_graph(_ir_model(op, domain, in_subgraph).graph)
    with pytest.raises(InvalidGraph):
        scan.required_operators(_ir_model(op, domain, in_subgraph), None)
    with pytest.raises(InvalidGraph):
        reduce([path], str(tmp_path / "out"))


def test_model_local_function_names_are_checked():
    model = _ir_model("Relu")
    model.functions = [ir.Function('F"""', "local", ["a"], ["b"], [], {},
                                   [ir.Node("Relu", ["a"], ["b"])], {"": 17})]
    with pytest.raises(InvalidGraph, match="model-local function 0"):
        checker.check_model_identifiers(model)


def test_plain_identifiers_pass():
    for domain, op in [("", "Relu"), ("ai.onnx.ml", "TreeEnsembleClassifier"),
                       ("com.microsoft", "FusedMatMul"), ("com.onnxedge", "FusedGemm"), ("", "_x1")]:
        assert checker.op_identifier_error(domain, op) is None
    assert checker.check_model_identifiers(_ir_model("Relu")) is not None


@pytest.mark.parametrize("line", ['ai.onnx;17;Relu"""', "ai.onnx;17;Rélu", "ai.onnx;17;1Relu",
                                  'com.x"""\n;1;Relu', "ai onnx;17;Relu"])
def test_config_reader_refuses_non_identifiers(line):
    with pytest.raises(InvalidArgument):
        scan.parse_config(line)


def test_config_writer_and_index_refuse_non_identifiers(tmp_path):
    with pytest.raises(InvalidGraph, match="not an identifier"):
        scan.format_config({("ai.onnx", 17): {"Relu\ncom.evil;1;X"}})
    text = scan.format_config({("ai.onnx", 17): {"Relu"}}, "made from m\n\u2028x\rai.onnx;1;Y")
    assert [l for l in text.splitlines() if not l.startswith("#")] == ["ai.onnx;17;Relu"]
    evil = 'X"""\nopen("%s", "w").close()\n"""' % str(tmp_path / SENTINEL)
    with pytest.raises(InvalidGraph):
        wheel.restricted_op_modules_source({("", "Relu"): ["activation"]}, {"activation"}, [("", evil)])
    with pytest.raises(InvalidGraph):
        wheel.build_wheel({("ai.onnx", 17): {evil}}, str(tmp_path))
    _no_sentinel(str(tmp_path))


def test_registry_hint_quotes_what_it_offers_to_paste(monkeypatch):
    """The NotImplemented hint's command is safe to paste: each model text is one shell word."""
    from onnxedge.kernels import op_modules, registry
    monkeypatch.setattr(op_modules, "REDUCED_BUILD_HINT", wheel.rebuild_hint([EVIL_FILE, "c.config"]),
                        raising=False)
    op = "Op'$(touch %s)" % SENTINEL   # what an IR built by hand may hold
    hint = registry._reduced_build_hint("ai.onnx", op, 17)
    command = hint[hint.index("`onnxedge reduce") + 1:hint.rindex("`")]
    argv = shlex.split(command)
    assert argv[:3] == ["onnxedge", "reduce", EVIL_FILE]
    assert argv[argv.index("--add-op") + 1] == "ai.onnx;17;" + op
    assert argv[argv.index("--config") + 1].endswith("required_operators.config")
