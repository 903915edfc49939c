# backprop-lessons: `make book` builds the HTML book, `make test` runs everything.
# Both start from a bare Debian machine with Python 3.11: they create .venv,
# install the pinned requirements and the package, and install the system
# programs they need with apt-get when run as root (otherwise they say what
# to install).

SHELL       := /bin/bash
PYTHON      ?= python3
VENV        := .venv
BIN         := $(VENV)/bin
STAMP       := $(VENV)/.installed
CHROMIUM    ?= /usr/bin/chromium
BOOK_FLAGS  := -W -n --keep-going
NOTEBOOKS   := $(sort $(wildcard notebooks/*.ipynb))
# Nothing the suites run may reach beyond this machine: chapter 9's optional
# cell (the real GPT-2 weights) skips without even trying to connect, and
# transformers never looks for the hub.
export HF_HUB_OFFLINE := 1
# Each suite ends with its wall-clock and CPU time, so that a maintainer sees
# where make test's minutes go: scripts/timed.sh counts every process the
# suite starts, Chromium's too, where it can (as root, with cgroup v1), and
# says when it can count only the processes the suite waited for.
TIMED = scripts/timed.sh $@

.PHONY: book lab test check chapter lint unit multiprocess package reader-runtime nbval \
        nbval-profiles nbval-avx2 nbval-baseline nbval-load book-strict browser bench notebooks vendor \
        clean distclean python-ok dot-ok chromium-ok

book: $(STAMP)
	$(BIN)/jupyter-book build . $(BOOK_FLAGS)
	@echo "The book is in _build/html (open _build/html/index.html)."

# Read the chapters live: JupyterLab from .venv, whose widget extensions are
# the ones the kernel's packages need (the steppers and self-checks run; a
# JupyterLab from elsewhere shows their text instead).  The repository is its
# root; it starts in notebooks/.  The notebooks are trusted first: stored
# widgets (steppers, self-checks) render only in a trusted notebook, and a
# fresh clone's are not (the signatures go to Jupyter's data folder, not
# into the files).  Its configuration (scripts/lab) saves the widgets' state
# with a notebook and keeps what the outputs show, so a chapter run and
# saved keeps working widgets and one saved unchanged stays unchanged.  As
# root (a container, a cloud VM) JupyterLab refuses to start without
# --allow-root.  LAB_ARGS adds options (`make lab LAB_ARGS=--no-browser`);
# tests/browser/test_jupyterlab.py starts it so.
LAB_ARGS ?=
lab: $(STAMP) dot-ok
	$(BIN)/jupyter trust $(NOTEBOOKS)
	$(BIN)/jupyter lab --config=scripts/lab/jupyter_lab_config.py --ServerApp.root_dir=. \
	    --LabApp.default_url=/lab/tree/notebooks $$([ "$$(id -u)" = 0 ] && echo --allow-root) \
	    $(LAB_ARGS)

# make test: the lint; then the two things the run needs built, side by side
# (the book, built strictly, and the readers' runtime, into which a chapter's
# setup cell installs the package); then one pytest run of everything on two
# workers: the unit tests, every notebook executed once and checked by nbval
# (in the readers' runtime, as on an AVX2 CPU: ARCHITECTURE.md, "How the
# notebooks are checked"), the tests that start processes, the package
# installed as a reader installs it, and the browser tests of the built book
# and of JupyterLab.  xdist hands out the work as workers free up (--dist
# loadgroup): a notebook's cells, a page's browser tests, JupyterLab's and
# the process-starting tests each stay together on one worker, in order, and
# the largest groups go first.  No lane is balanced by hand.  It ends with
# its wall-clock and CPU time (scripts/timed.sh); --durations lists the
# slowest items.
test: lint dot-ok chromium-ok
	$(MAKE) --no-print-directory -j2 book-strict reader-runtime
	$(TIMED) $(NBVAL_ENV) CHROMIUM=$(CHROMIUM) $(BIN)/pytest -n 2 --dist loadgroup \
	    $(NBVAL_FLAGS) -m "not full_size" -q --durations=15 tests $(NOTEBOOKS)
	@echo "make test: everything passed."

# Threads must not spin while another test holds the core they wait for:
# OpenMP's (PyTorch's) wait passively, and OpenBLAS (NumPy's matmuls), whose
# idle threads spin with no setting to stop them, runs one thread.  With two
# OpenBLAS threads beside other work, chapter 6's training cell took 24 s
# instead of 6, and the unit tests minutes instead of one.  Neither changes a
# result: OpenBLAS splits a matmul by blocks of its output, so each element
# sums in the same order, and nbval checks the stored outputs with one thread
# of every library anyway.
SUITES := test check chapter unit multiprocess package nbval nbval-profiles nbval-avx2 \
          nbval-baseline nbval-load book-strict browser reader-runtime mutants
$(SUITES): export OMP_WAIT_POLICY := PASSIVE
$(SUITES): export OPENBLAS_NUM_THREADS := 1

# ruff's linter and formatter check (configured in pyproject.toml); fix with
# `.venv/bin/ruff check --fix . && .venv/bin/ruff format .`; then actionlint
# on the GitHub workflows.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/actionlint .github/workflows/*.yml

# The parts of make test, each alone.  The unit tests leave out what needs a
# build (the browser tests, the readers' runtime's test), what starts processes
# (marked `multiprocess`), the package's install (`package`) and the
# 124M-parameter check against transformers (`full_size`, 5 GB, ~45 s: it is
# chapter 9's notebook cell too, which nbval runs; `pytest -m full_size
# tests` runs the test's copy).
unit: $(STAMP) dot-ok
	$(TIMED) $(BIN)/pytest tests --ignore=tests/browser --ignore=tests/colab/test_reader_runtime.py \
	    -m "not multiprocess and not package and not full_size" -q -n 2 --durations=8

# The tests that start processes (torch.distributed workers, torchrun), one
# at a time: two side by side (a torchrun launch beside a group of
# run_workers) once broke a gloo mesh.  Their time limits start once the
# workers are up, so a busy machine slows them, never fails them.
multiprocess: $(STAMP)
	$(TIMED) $(BIN)/pytest tests -m multiprocess -q -p no:xdist --durations=4

# The package installed into an empty venv as a reader installs it (pip
# install ., its dependencies from PyPI through pip's cache).
package: $(STAMP)
	$(TIMED) $(BIN)/pytest tests/package -q

# The readers' runtime (scripts/reader_runtime.py): Colab's preinstalled
# packages at Colab's versions, PyTorch from .venv, and the package as a
# chapter's setup cell installs it (anew on every run; the rest is rebuilt
# only when its inputs change).  nbval runs every notebook in it.
READER      := $(VENV)/reader-runtime
reader-runtime: $(STAMP)
	$(TIMED) $(BIN)/python scripts/reader_runtime.py $(READER)

# nbval checks the stored outputs, every notebook once, in the readers'
# runtime, over Unix sockets (conftest.py).  The outputs are what `make
# notebooks` printed in .venv with this CPU's kernels, so the check compares
# another runtime's libraries (Colab's IPython, ipywidgets, NumPy) and, with
# a profile below, another CPU's digits with them: what a checked output
# shows must read alike in both.
NBVAL_FLAGS := --nbval --nbval-kernel-name backprop-reader --nbval-sanitize-with nbval_sanitize.cfg \
               --nbval-kernel-startup-timeout 300
NBVAL_RUN   := $(BIN)/pytest $(NBVAL_FLAGS) -n 2 --dist loadgroup -q
NBVAL_ENV    = JUPYTER_PATH=$(abspath $(READER))/share/jupyter READER_RUNTIME=$(abspath $(READER)) \
               $(PROFILE_AVX2) $(ONE_THREAD)

nbval: reader-runtime dot-ok
	$(TIMED) JUPYTER_PATH=$(abspath $(READER))/share/jupyter $(NBVAL_RUN) $(NOTEBOOKS)

# The stored outputs must read the same on any x86-64 CPU and thread count.
# NumPy, OpenBLAS, PyTorch and glibc's math library pick SIMD kernels at run
# time, and round-off follows them; switching kernels off (which works on any
# CPU, unlike switching them on) shows what another machine prints.  PyTorch's
# matmuls run in MKL and oneDNN, which ignore ATEN_CPU_CAPABILITY: they take
# their own caps (MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA).  Without them
# an Intel AVX-512 machine ran float64 matmuls down a path no profile covered.
# make test runs the AVX2 profile (one thread: an AVX2 machine, Colab's and
# most readers'); `make nbval` runs natively with PyTorch's default threads,
# and `make nbval-baseline` an older CPU (SSE only: no AVX, no FMA), which the
# GitHub workflow runs as a job of its own.  On a CPU without AVX-512 the
# AVX2 profile is its native kernels.
ONE_THREAD       := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
PROFILE_AVX2     := NPY_DISABLE_CPU_FEATURES=X86_V4,AVX512_ICL ATEN_CPU_CAPABILITY=avx2 \
                    MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
PROFILE_BASELINE := NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL ATEN_CPU_CAPABILITY=default \
                    MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \
                    OPENBLAS_CORETYPE=Sandybridge GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA

nbval-profiles: nbval-avx2 nbval-baseline

nbval-avx2: reader-runtime dot-ok
	$(TIMED) $(NBVAL_ENV) $(NBVAL_RUN) $(NOTEBOOKS)

nbval-baseline: reader-runtime dot-ok
	$(TIMED) JUPYTER_PATH=$(abspath $(READER))/share/jupyter $(PROFILE_BASELINE) $(ONE_THREAD) \
	    $(NBVAL_RUN) $(NOTEBOOKS)

# Every chapter with a measurement cell (one that opens with "# Measurement"),
# three times in a row while one busy process per core competes for the CPU
# (scripts/under_load.py starts them and always stops them): the conclusions
# checked next to the measurements must hold on a loaded machine.  Several
# minutes, so not part of `make test`.
LOAD_NOTEBOOKS = $(shell grep -l '# Measurement' $(NOTEBOOKS))

nbval-load: reader-runtime dot-ok
	$(NBVAL_ENV) $(BIN)/python scripts/under_load.py --repeat 3 -- $(NBVAL_RUN) $(LOAD_NOTEBOOKS)

book-strict: $(STAMP)
	$(TIMED) $(BIN)/jupyter-book build . --all $(BOOK_FLAGS)

# Two browsers side by side (see tests/browser/conftest.py): the tests mostly
# wait on page loads, MathJax and axe, so two overlap their waits.
browser: $(STAMP) chromium-ok
	$(TIMED) CHROMIUM=$(CHROMIUM) $(BIN)/pytest tests/browser -q -n 2 --dist loadgroup

# The inner loop while working on one chapter, in minutes: `make check`
# (lint and the unit tests) and `make chapter CH=06` (re-execute chapter 06
# in .venv, store it as JupyterLab saves it, check its outputs with nbval as
# make test does, then run the tests of the package modules it imports and
# of its conventions: scripts/chapter.py finds them).  make test stays the
# gate.
check: lint unit

CH ?=
chapter: reader-runtime dot-ok
	@nb=$$($(BIN)/python scripts/chapter.py notebook "$(CH)") && \
	  tests=$$($(BIN)/python scripts/chapter.py tests "$(CH)") && \
	  stem=$$(basename $$nb .ipynb) && \
	  echo "make chapter: $$nb" && \
	  (cd notebooks && ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	     --ExecutePreprocessor.record_timing=False $$(basename $$nb)) && \
	  $(BIN)/python scripts/lab_form.py $$nb && \
	  $(TIMED) $(NBVAL_ENV) $(BIN)/pytest -n 2 --dist loadgroup -q -m "not full_size" \
	    $(NBVAL_FLAGS) $$nb $$tests && \
	  $(BIN)/pytest -q -n 2 tests/conventions/test_notebooks.py tests/conventions/test_live_workbench.py \
	    tests/conventions/test_show_targets.py -k "$$stem"

# Re-execute every notebook top to bottom in a fresh kernel and store its
# outputs (and widget state) - run after changing a chapter or the package -
# in the form JupyterLab saves (scripts/lab_form.py), so that opening and
# saving a chapter in `make lab` changes no byte of it.
notebooks: $(STAMP) dot-ok
	cd notebooks && for nb in $(notdir $(NOTEBOOKS)); do \
	  ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.record_timing=False "$$nb" || exit 1; done
	$(BIN)/python scripts/lab_form.py $(NOTEBOOKS)

# The student edition, for courses: every chapter without its solution
# cells, the book's version of what the reader writes, or the self-checks'
# answers (scripts/student_edition.py says what goes and what stays), in
# _build/student/notebooks.  It writes nothing, and says which cells, when a
# kept cell uses a name only a removed cell defines (Run All would stop).
.PHONY: student grade mutants
student: $(STAMP)
	rm -rf _build/student/notebooks
	$(BIN)/python scripts/student_edition.py --out _build/student/notebooks $(NOTEBOOKS)

# Grade filled-in notebooks exercise by exercise (python -m
# backprop_lessons.grade): `make grade` runs every chapter of notebooks/ (a
# reader's own clone: several CPU-minutes), `make grade GRADE=FILE` one
# notebook; GRADE_ARGS adds options (`--json results.json`, `--timeout 600`).
GRADE      ?= notebooks
GRADE_ARGS ?=
grade: $(STAMP)
	$(BIN)/python -m backprop_lessons.grade $(GRADE) $(GRADE_ARGS)

# The autograder for Gradescope (scripts/gradescope/build.py): setup.sh,
# run_autograder, autograde.py and this checkout's wheel in
# _build/gradescope/autograder.zip, to upload as an assignment's autograder;
# CHAPTERS="04 06" grades those chapters only (book/instructors.md).
CHAPTERS ?=
.PHONY: gradescope
gradescope: $(STAMP)
	$(BIN)/python scripts/gradescope/build.py --out _build/gradescope $(CHAPTERS)

# The mutation test of the solutions (scripts/mutants.py): each chapter runs
# headless with wrong versions of every solution made from its syntax tree
# (`+=` made `=`, an operator swapped, a term dropped, a constant changed,
# ...), and each must fail its exercise's check, unless
# scripts/mutants_equivalent.toml lists it as computing the same thing.
# `make mutants CH=04` runs one chapter; the chapters run one at a time
# (8 and 12 start processes, 9 needs about 5 GB).  About 15 minutes in all,
# so not part of make test.  Figures and survivors in _build/mutants
# (results.md, results.json); MUTANTS_ARGS adds options (--max-per-exercise,
# --timeout).
MUTANTS_ARGS ?=
mutants: $(STAMP) dot-ok
	$(TIMED) $(BIN)/python scripts/mutants.py $(CH) $(MUTANTS_ARGS)

# Benchmarks compare with other engines, which the book itself does not need.
# They write benchmarks/results/*.json, and report.py the tables and chart
# that book/performance.md includes.
bench: $(STAMP)
	$(BIN)/pip install --quiet micrograd==0.1.0
	$(BIN)/python benchmarks/scalar_engine.py
	$(BIN)/python benchmarks/gc_cost.py
	$(BIN)/python benchmarks/tensor_engine.py
	$(BIN)/python benchmarks/gpt_step.py
	$(BIN)/python benchmarks/microgpt_step.py
	$(BIN)/python benchmarks/memory_layers.py
	$(BIN)/python benchmarks/gpt2_124m.py --settings default default+malloc 1+malloc
	$(BIN)/python benchmarks/report.py
	@echo "Results in benchmarks/results; the book's performance appendix includes them (make book)."

# Refresh the vendored front-end files in book/_static/vendor (needs npm).
vendor:
	@command -v npm >/dev/null || { echo "make vendor needs npm (apt-get install npm)"; exit 1; }
	rm -rf _build/vendor && mkdir -p _build/vendor && cd _build/vendor && \
	  npm pack --silent mathjax@3.2.2 requirejs@2.3.7 @jupyter-widgets/html-manager@1.0.15 && \
	  for t in *.tgz; do mkdir -p "$${t%.tgz}" && tar xzf "$$t" -C "$${t%.tgz}"; done
	cp _build/vendor/mathjax-3.2.2/package/es5/tex-svg-full.js book/_static/vendor/mathjax/
	cp _build/vendor/mathjax-3.2.2/package/LICENSE book/_static/vendor/mathjax/LICENSE
	cp _build/vendor/requirejs-2.3.7/package/require.js book/_static/vendor/requirejs/
	cp _build/vendor/jupyter-widgets-html-manager-1.0.15/package/dist/embed-amd.js \
	   _build/vendor/jupyter-widgets-html-manager-1.0.15/package/dist/*.{woff,woff2,ttf,eot,svg} \
	   book/_static/vendor/html-manager/

clean:
	rm -rf _build

distclean: clean
	rm -rf $(VENV)

# ---- set-up -------------------------------------------------------------------

# pip installs one package at a time, on one core: first its own pin
# (requirements.txt says why), then two runs side by side
# take every other pin each, without dependencies (requirements.txt lists
# them all, setuptools and wheel too); then the package, and `pip check`,
# which fails naming any dependency of any package (the package's own
# ranges too) that the pins miss or contradict.  (A resolving pip run
# would quietly install what is missing, unpinned, in 14 CPU-seconds.)
# Then scripts/compile_site.py byte-compiles what they installed, but the
# trees no process here imports (pip compiled everything: 35 CPU-seconds
# instead of 22).
PIP := $(BIN)/pip install --quiet --disable-pip-version-check --no-compile

$(STAMP): requirements.txt pyproject.toml | python-ok
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $$(grep '^pip==' requirements.txt)
	awk '/^[A-Za-z0-9]/ && !/^pip==/ { print > (++n % 2 ? "$(VENV)/pins-odd.txt" : "$(VENV)/pins-even.txt") }' \
	    requirements.txt
	$(PIP) --no-deps -r $(VENV)/pins-odd.txt & odd=$$!; \
	  $(PIP) --no-deps -r $(VENV)/pins-even.txt; even=$$?; \
	  wait $$odd && exit $$even
	$(PIP) --no-deps -e .
	$(BIN)/python scripts/compile_site.py $(VENV)
	$(BIN)/pip check
	touch $(STAMP)

# apt-install PACKAGE WHAT: install a Debian package when running as root,
# otherwise stop with a message saying what to install.
define apt-install
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing $(2) with apt-get (needed for $(1))"; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(2)) >/dev/null \
	    || { echo "error: apt-get install $(2) failed"; exit 1; }; \
	else \
	  echo "error: $(1) is missing. Install it: sudo apt-get install $(2)"; exit 1; \
	fi
endef

python-ok:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	  || { echo "error: Python 3.11 or newer is needed as '$(PYTHON)' (make PYTHON=python3.11 ...)"; exit 1; }
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { $(call apt-install,Python's venv module,python3-venv); }

dot-ok:
	@command -v dot >/dev/null 2>&1 || { $(call apt-install,graphviz's dot program,graphviz); }

chromium-ok:
	@[ -x "$(CHROMIUM)" ] || { $(call apt-install,Chromium for the browser tests,chromium); }
