"""The units `make test` hands its processes (tests/scheduling.py): a browser file whole, the Gemma tests together,
any other test alone."""
from __future__ import annotations

from scheduling import scope_of


def test_a_browser_file_goes_whole():
    assert scope_of("tests/browser/test_app.py::test_a_beam_tree_appears") == "tests/browser/test_app.py"
    assert scope_of("tests/browser/test_app.py::test_each_page_renders_without_an_exception[compare]") == \
        "tests/browser/test_app.py"


def test_the_gemma_tests_go_together_and_the_others_alone():
    assert scope_of("tests/engine/test_bundled_gemma.py::test_x") == "gemma"
    assert scope_of("tests/ui/test_teacher_demos.py::test_y[zh-gemma3-270m]") == "gemma"
    assert scope_of("tests/engine/test_engine.py::test_z[llama]") == "tests/engine/test_engine.py::test_z[llama]"
