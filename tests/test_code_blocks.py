"""Code blocks of a reply applied to files (features/reply_edits/blocks.py): pure
logic, the replies are the packaged 1.5B's own (bench/HISTORY.md, "Agent
tasks: edits written in the reply")."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from agentls.core.editor.reply_edits import ReplyEdits, gave_up_text, reply_note, written_call
from agentls.features.reply_edits.blocks import apply_reply, find_code_blocks, prose_of, read_reply

SCORES = "def average(values):\n    return sum(values) / len(values)\n"
REPORT = ('from scores import average\n\n\ndef summary(scores):\n'
          '    return f"average score: {average(scores)}"\n')
FILES = {"scores.py": SCORES, "report.py": REPORT}


def test_file_tags_replace_their_files_whole() -> None:
    reply = ('Sure, here is the updated code:\n\n<file path="scores.py">\n'
             'def average(values, digits):\n    return round(sum(values) / len(values), digits)\n'
             '</file>\n\n<file path="report.py">\nfrom scores import average\n\n\n'
             'def summary(scores):\n    return f"average score: {average(scores, digits=1)}"\n'
             '</file>\n')
    applied = {a.path: a for a in apply_reply(reply, FILES)}
    assert applied["scores.py"].how == "whole"
    assert applied["scores.py"].new_text == (
        "def average(values, digits):\n    return round(sum(values) / len(values), digits)\n")
    assert "average(scores, digits=1)" in applied["report.py"].new_text


def test_bare_code_split_at_path_comments_even_with_an_example_prefix() -> None:
    # The model copied "path/to/" from the instructions' example.
    reply = ("# path/to/scores.py\ndef average(values, digits=1):\n"
             "    return round(sum(values) / len(values), digits)\n\n"
             "# path/to/report.py\nfrom scores import average\n\n\ndef summary(scores):\n"
             '    return f"average score: {average(scores, digits=1)}"\n')
    applied = {a.path: a.new_text for a in apply_reply(reply, FILES)}
    assert set(applied) == {"scores.py", "report.py"}
    assert applied["scores.py"].startswith("def average(values, digits=1):")
    assert "# path/to" not in applied["report.py"]


def test_a_function_block_without_a_path_is_merged_into_the_file_defining_it() -> None:
    words = ('import re\n\n\ndef is_palindrome(text):\n    """Doc."""\n'
             '    raise NotImplementedError\n\n\ndef other():\n    return 1\n')
    reply = ("Here's how:\n\n```python\ndef is_palindrome(text):\n    \"\"\"Doc.\"\"\"\n"
             "    cleaned = ''.join(c.lower() for c in text if c.isalnum())\n"
             "    return cleaned == cleaned[::-1]\n\nprint(is_palindrome('agent'))\n```\n")
    [applied] = apply_reply(reply, {"words.py": words, "notes.py": "X = 1\n"})
    assert applied.path == "words.py" and applied.how == "definitions"
    assert applied.names == ("is_palindrome",)
    assert "raise NotImplementedError" not in applied.new_text
    assert "def other():\n    return 1\n" in applied.new_text  # the rest is kept
    assert "print(" not in applied.new_text  # the example call is not part of the file
    assert applied.new_text.startswith("import re\n")


def test_new_imports_go_after_the_files_own_and_new_functions_at_the_end() -> None:
    text = "import os\n\n\ndef a():\n    return os.sep\n"
    reply = ("```python\nimport re\n\n\ndef a():\n    return re.escape(os.sep)\n\n\n"
             "def b():\n    return 2\n```")
    [applied] = apply_reply(reply, {"m.py": text})
    assert applied.new_text == ("import os\nimport re\n\n\ndef a():\n    return re.escape(os.sep)"
                                "\n\n\ndef b():\n    return 2\n")


CIPHER = "class Cipher:\n    def __init__(self, key=None):\n        pass\n"


def test_an_imports_block_beside_the_file_written_without_them_goes_to_its_top() -> None:
    # The 1.5B's reply to ruff's F821 in an Exercism run: the imports in a
    # bare block ("add these at the top"), then the file without them.
    reply = ("The `random` and `string` modules are not imported. Add the following lines "
             "at the top of the file:\n\n```python\nimport random\nimport string\n```\n\n"
             '<file path="simple_cipher.py">\nclass Cipher:\n    def __init__(self, key=None):\n'
             "        self.key = key or ''.join(random.choice(string.ascii_lowercase)"
             " for _ in range(100))\n</file>\n")
    [applied] = apply_reply(reply, {"simple_cipher.py": CIPHER, "other.py": "X = 1\n"})
    assert applied.path == "simple_cipher.py"
    assert applied.new_text.startswith("import random\nimport string\n\nclass Cipher:")
    assert "random.choice(string.ascii_lowercase)" in applied.new_text


def test_an_imports_block_alone_goes_to_the_one_file_that_lacks_them() -> None:
    uses = 'import os\n"""Doc."""\n\n\ndef key():\n    return random.random()\n'
    reply = "Add this import:\n\n```python\nimport random\n```\n"
    [applied] = apply_reply(reply, {"cipher.py": uses, "other.py": "def f():\n    return 1\n"})
    assert applied.path == "cipher.py"
    assert applied.new_text == ('import os\nimport random\n"""Doc."""\n\n\ndef key():\n'
                                "    return random.random()\n")


def test_an_import_a_later_whole_file_of_the_same_reply_dropped_is_kept() -> None:
    stub = "def private_key(p):\n    pass\n\n\ndef public_key(p, g, private):\n    pass\n"
    reply = ("### Change 1\n\n```python\nimport secrets\n\ndef private_key(p):\n"
             "    return secrets.randbelow(p - 2) + 2\n```\n\nThe whole file:\n\n"
             '<file path="dh.py">\ndef private_key(p):\n    return secrets.randbelow(p - 2) + 2'
             "\n\n\ndef public_key(p, g, private):\n    return pow(g, private, p)\n</file>\n")
    [applied] = apply_reply(reply, {"dh.py": stub})
    assert applied.new_text.startswith("import secrets\n")
    assert "return pow(g, private, p)" in applied.new_text
    assert applied.new_text.count("import secrets") == 1


def test_an_imports_block_no_file_needs_or_a_file_of_imports_named_is_not_merged() -> None:
    files = {"a.py": "import random\n\n\ndef f():\n    return random.random()\n",
             "b.py": "def g():\n    return 1\n"}
    assert apply_reply("```python\nimport random\n```\n", files) == []  # nothing lacks it
    # Two files lack it: which one is meant is a guess, so neither changes.
    two = {"a.py": "def f():\n    return random.random()\n",
           "b.py": "def g():\n    return random.random()\n"}
    assert apply_reply("```python\nimport random\n```\n", two) == []
    # A package's __init__.py is imports only: a block naming it is its new text.
    init = {"pkg/__init__.py": "from .a import f\nfrom .b import g\n"}
    [applied] = apply_reply('<file path="pkg/__init__.py">\nfrom .a import f\n</file>\n', init)
    assert applied.new_text == "from .a import f\n" and applied.how == "whole"


def test_a_fence_named_on_the_line_before_or_in_its_info_belongs_to_that_file() -> None:
    reply = ("In `report.py`:\n```python\ndef summary(scores):\n    return 'x'\n```\n"
             "```python scores.py\ndef average(values):\n    return 0\n```\n")
    blocks = find_code_blocks(reply, FILES)
    assert [b.path for b in blocks] == ["report.py", "scores.py"]


def test_blocks_that_change_nothing_or_name_no_known_file_are_left_alone() -> None:
    assert apply_reply("Run it with:\n```sh\npytest -q\n```\n", FILES) == []
    assert apply_reply(f'<file path="scores.py">\n{SCORES}</file>', FILES) == []
    # A file the reply names that is not there is not written into another one.
    reply = '<file path="other.py">\ndef average(values):\n    return 0\n</file>'
    assert apply_reply(reply, FILES) == []
    assert [b.path for b in find_code_blocks(reply, FILES)] == ["other.py"]
    # Code that does not parse is not merged by definition.
    assert apply_reply("```python\ndef average(:\n```", FILES) == []


def test_a_non_python_file_changes_only_when_the_block_names_it() -> None:
    files = {"notes.md": "# Notes\n", "a.py": "X = 1\n"}
    assert apply_reply("```markdown\n# Notes\nmore\n```", files) == []
    [applied] = apply_reply('<file path="notes.md">\n# Notes\nmore\n</file>', files)
    assert applied.path == "notes.md" and applied.new_text == "# Notes\nmore\n"


def test_a_renamed_class_in_a_whole_file_replaces_the_file() -> None:
    files = {"models.py": "class Usr:\n    def __init__(self, name):\n        self.name = name\n"}
    reply = ('<file path="models.py">\nclass User:\n    def __init__(self, name):\n'
             '        self.name = name\n</file>')
    [applied] = apply_reply(reply, files)
    assert applied.how == "whole" and "Usr" not in applied.new_text


def test_a_file_repeated_with_other_blank_lines_is_an_echo_not_an_edit() -> None:
    files = {"main.py": "import helpers\n\n\ndef start():\n    print(helpers.banner())\n"}
    reply = ('<file path="main.py">\nimport helpers\n\ndef start():\n'
             '    print(helpers.banner())\n</file>')
    assert read_reply(reply, files) == ([], ["main.py"])
    assert prose_of(reply) == ""
    words = "The banner is `Welcome`."
    assert prose_of(words + "\n```python\nx = 1\n```\n") == words


def test_a_reply_that_is_a_json_call_or_an_echo_gets_a_note_once_the_rest_stands() -> None:
    offered = ["read_file", "run_command"]
    call = ('```json\n{\n  "name": "initials",\n'
            '  "arguments": {"full_name": "ada lovelace"}\n}\n```')
    assert written_call(call) == "initials"
    note = reply_note(call, offered, None, "To change a file, write it.")
    assert note is not None and "'initials', which is not a tool" in note
    assert "read_file, run_command" in note and "To change a file, write it." in note
    offered_call = '{"name": "read_file", "parameters": {"path": "a.py"}}'
    assert "written as text is not run" in (reply_note(offered_call, offered, None) or "")
    # Not calls: prose around JSON, JSON without arguments, a plain answer.
    assert written_call('Call it like {"name": "x", "arguments": {}} please') is None
    assert written_call('{"name": "x"}') is None
    assert reply_note("The port is 8421.", offered, None) is None
    hinted = reply_note(call, offered, ReplyEdits(defined_in=(("initials", "names.py"),)))
    assert hinted is not None and "a function in names.py, not a tool" in hinted
    assert '<file path="names.py">' in hinted
    echo = ReplyEdits(unchanged=("server.py",), words=False)
    assert "repeated server.py" in (reply_note("<file ...>", offered, echo) or "")
    assert reply_note("<file ...>", offered, replace(echo, words=True)) is None


def test_a_reply_that_did_nothing_again_tells_the_user_no_file_changed() -> None:
    echo = ReplyEdits(unchanged=("server.py",), words=False)
    said = gave_up_text("<file ...>", echo)
    assert said is not None and said.startswith("The model repeated server.py unchanged, twice")
    called = gave_up_text('{"name": "read_file", "arguments": {"path": "a.py"}}', None)
    assert called is not None and "tool call as text" in called
    assert gave_up_text("<file ...>", replace(echo, words=True)) is None
    assert gave_up_text("The port is 8421.", None) is None


def _best_seconds(work: Callable[[], object], runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


@pytest.mark.parametrize("shape", ["unclosed file tags", "a long path-like line before a fence",
                                   "unclosed fences"])
def test_reading_a_reply_grows_linearly_with_its_size(shape: str) -> None:
    """Four times the reply takes about four times as long, not sixteen
    (the reply is read while the turn runs; a quadratic parse of an 80 KB
    reply took seconds)."""
    def reply(n: int) -> str:
        if shape == "unclosed file tags":
            return '<file path="scores.py">\nX = 1\n</file>\n' + "".join(
                f'<file path="gen/x{i}.py">x\n' for i in range(n))
        if shape == "a long path-like line before a fence":
            return "a/" * (4 * n) + "\n```python\nX = 1\n```\n"
        return "```x\n" * n

    def read(n: int) -> Callable[[], object]:
        text = reply(n)
        return lambda: (find_code_blocks(text, FILES), prose_of(text))

    small, large = _best_seconds(read(500)), _best_seconds(read(2000))
    assert large < 8 * small + 0.005, (small, large)


def test_a_reply_cut_before_its_closing_tag_still_gives_its_closed_blocks() -> None:
    reply = ('<file path="scores.py">\nX = 1\n</file>\nand <file path="report.py">\n'
             'def summary(scores):\n    return ""\n')
    assert [(b.path, b.text) for b in find_code_blocks(reply, FILES)] == [("scores.py", "X = 1\n")]
    assert prose_of(reply).startswith('and <file path="report.py">')
    assert prose_of("a\n````\nx\n```\nb\n```\nc") == "a\n\nb\n```\nc"  # as a regex read it


def test_a_file_block_a_small_model_closed_with_a_code_fence_is_kept() -> None:
    # Qwen2.5-Coder-1.5B on robot-name: `<file path>` opened, a lone fence closed it.
    reply = ('Here is the class:\n<file path="robot_name.py">\nclass Robot:\n'
             '    def reset(self):\n        pass\n```\nThis resets the name.')
    [block] = find_code_blocks(reply, ["robot_name.py"])
    assert block.path == "robot_name.py"
    assert block.text == "class Robot:\n    def reset(self):\n        pass\n"


def test_a_file_block_with_an_unquoted_path_is_kept() -> None:
    [block] = find_code_blocks("<file path=robot_name.py>\nX = 1\n</file>", ["robot_name.py"])
    assert (block.path, block.text) == ("robot_name.py", "X = 1\n")


def test_a_file_block_that_just_stops_is_not_taken() -> None:
    # A reply cut short (max tokens): writing it would cut the file's tail off.
    assert find_code_blocks('<file path="robot_name.py">\nclass Robot:\n    def res',
                            ["robot_name.py"]) == []


def test_a_reply_that_says_it_changes_a_file_but_writes_none_gets_a_note_once(
        tmp_path: Path) -> None:
    """The 1.5B's "Change the content of `simple_cipher.py` to implement the
    cipher." and nothing more, or the file back unchanged under "Change ...
    to:": nothing changed, so the model is told to write the file (once per
    turn, tool_calls.py); an answer in words that changes nothing stands."""
    from agentls.core.editor.reply_edits import ReplySources
    from agentls.features.reply_edits.feature import ReplyEditsFeature

    stub = "class Cipher:\n    pass\n"
    (tmp_path / "simple_cipher.py").write_text(stub)
    sources = ReplySources((str(tmp_path),), None,
                           ("Modify the supplied files: simple_cipher.py",
                            f'<file path="simple_cipher.py">\n{stub}</file>'))
    feature = ReplyEditsFeature()
    said = feature.reply_edits(
        "Change the content of `simple_cipher.py` to implement the Vigenère cipher.", sources)
    assert said.announced == ("simple_cipher.py",) and not said.calls
    note = reply_note("...", ["read_file"], said)
    assert note is not None and 'the complete new simple_cipher.py now as <file path=' in note
    echoed = feature.reply_edits(
        f"Change the content of `simple_cipher.py` to:\n\n```python\n{stub}```\n", sources)
    assert echoed.unchanged == ("simple_cipher.py",) and echoed.announced == echoed.unchanged
    # Words without a change, a file the session never showed, a real edit: no note.
    for words in ("simple_cipher.py holds the Cipher class.",
                  "Change the content of `other.py` to use it.",
                  "The additional tests in simple_cipher.py expect a key of letters."):
        assert feature.reply_edits(words, sources).announced == (), words
    edited = feature.reply_edits(
        "Change simple_cipher.py:\n```python\nclass Cipher:\n    key = 'a'\n```\n", sources)
    assert edited.calls and edited.announced == ()
    assert reply_note("...", ["read_file"], edited) is None


def test_files_echoed_with_a_tool_call_written_as_text_get_the_note(tmp_path: Path) -> None:
    """After failing tests the 1.5B wrote transpose.py back unchanged and a
    `{"tool": "write_file", ...}` after it: that is no answer in words, so
    the echo is sent back (once per turn) instead of ending the turn."""
    from agentls.core.editor.reply_edits import ReplySources
    from agentls.features.reply_edits.feature import ReplyEditsFeature

    code = "def transpose(text):\n    return text\n"
    (tmp_path / "transpose.py").write_text(code)
    sources = ReplySources((str(tmp_path),), None,
                           (f'<file path="transpose.py">\n{code}</file>',))
    block = f'<file path="transpose.py">\n{code}</file>\n'
    call = json.dumps({"tool": "write_file",
                       "arguments": {"path": "transpose.py", "content": code}})
    echoed = ReplyEditsFeature().reply_edits(block + call + "\n", sources)
    assert echoed.unchanged == ("transpose.py",) and not echoed.calls and not echoed.words
    note = reply_note(block + call, ["read_file"], echoed)
    assert note is not None and "repeated transpose.py without changing anything" in note
    # Words beside the call and the echo still make an answer.
    worded = ReplyEditsFeature().reply_edits(
        block + "The function already returns the text unchanged.\n" + call, sources)
    assert worded.words and reply_note("...", ["read_file"], worded) is None


def test_a_standard_module_the_reply_uses_without_importing_it_is_imported(
        tmp_path: Path) -> None:
    """simple-cipher on Exercism: the 1.5B wrote `random.choice(string.
    ascii_lowercase)` with neither imported; the tests failed on a NameError
    and took a second call to fix (diffie-hellman: never fixed). The edit
    the user is asked about carries the imports; what was missing before the
    reply, a name the file binds, a module used but not as `x.name`, and a
    module that is not the standard library's are left alone."""
    from agentls.core.editor.reply_edits import ReplySources
    from agentls.features.reply_edits.blocks import with_stdlib_imports
    from agentls.features.reply_edits.feature import ReplyEditsFeature

    body = ("class Cipher:\n    def __init__(self):\n"
            "        self.key = ''.join(random.choice(string.ascii_lowercase) for _ in range(9))\n")
    (tmp_path / "simple_cipher.py").write_text("class Cipher:\n    pass\n")
    sources = ReplySources((str(tmp_path),), None, ("class Cipher:\n    pass\n",))
    edits = ReplyEditsFeature().reply_edits(f'<file path="simple_cipher.py">\n{body}</file>',
                                            sources)
    [call] = edits.calls
    written = call.arguments["content"]
    assert written.startswith("import random\nimport string\n\nclass Cipher:"), written
    namespace: dict[str, object] = {}
    exec(compile(written, "simple_cipher.py", "exec"), namespace)
    assert len(namespace["Cipher"]().key) == 9  # type: ignore[operator]
    # A new file gets them too, after its docstring and __future__ import.
    new = ReplyEditsFeature().reply_edits(
        '<file path="keys.py">\n"""Keys."""\nfrom __future__ import annotations\n\n\n'
        'def pick():\n    return secrets.token_hex(4)\n</file>', sources)
    assert new.calls[0].arguments["content"].startswith(
        '"""Keys."""\nfrom __future__ import annotations\nimport secrets\n')
    text = "def f(json):\n    return json.dumps(os) + numpy.x + random + random.nope()\n"
    assert with_stdlib_imports("a.py", text) == text
    # swift-scheduling: names the 1.5B used without their `from ... import`;
    # `datetime.now()` is the class, `datetime.date` the module.
    used = "def due(start):\n    return datetime.now() + timedelta(hours=2)\n"
    assert with_stdlib_imports("a.py", used).startswith(
        "from datetime import datetime\nfrom datetime import timedelta\n\ndef due")
    assert with_stdlib_imports("a.py", "X = datetime.date(2020, 1, 1)\n").startswith(
        "import datetime\n")
    assert with_stdlib_imports("a.txt", "random.x\n") == "random.x\n"
    old = "def f():\n    return random.random()\n"
    assert with_stdlib_imports("a.py", old + "\n\ndef g():\n    return 1\n", old).startswith(
        "def f()")
