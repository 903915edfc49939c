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
NBVAL_FLAGS := --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg
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

.PHONY: book lab test check chapter reader-suites computed-suites process-suites lint unit multiprocess package nbval \
        nbval-profiles nbval-avx2 nbval-baseline nbval-load colab book-strict browser bench notebooks vendor \
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

# Four lanes side by side after the lint, each suite's output printed whole
# when it ends: the reader's lane builds the book strictly and drives Chromium
# over it and over chapter 2 run live in JupyterLab (mostly waiting on page
# loads, MathJax and axe, so it leaves CPU to the others); the computing lane
# runs the unit tests and then nbval as on an AVX2 machine; another runs
# every notebook as on Colab (rendering each notebook's markdown as Colab
# does).  The process lane runs the tests that start worker processes and
# torchrun (their time limits start when the workers are up, so a busy
# machine slows them, never fails them), then installs the wheel into an
# empty venv.
#
# nbval checks the stored outputs as on an AVX2 CPU (Colab's and most
# readers'), not natively: `make notebooks` stores what this CPU prints with
# its default threads, so the profile compares another machine's digits with
# this one's.  Each notebook pass costs about three CPU-minutes, and a 2-core
# machine has 24 in make test's twelve minutes: the native pass (`make
# nbval`) and the older-CPU profile (`make nbval-baseline`, an SSE-only CPU)
# run outside it, the latter as its own job in .github/workflows/test.yml.
test: lint dot-ok chromium-ok
	$(MAKE) --no-print-directory --output-sync=target \
	    -j4 reader-suites computed-suites process-suites colab
	@echo "make test: all suites passed."

# Threads must not spin while another suite holds the core they wait for:
# OpenMP's (PyTorch's) wait passively, and OpenBLAS (NumPy's matmuls), whose
# idle threads spin with no setting to stop them, runs one thread.  With two
# OpenBLAS threads beside the other suites, chapter 6's training cell took
# 24 s instead of 6, and the unit tests minutes instead of one.  Neither
# changes a result: OpenBLAS splits a matmul by blocks of its output, so each
# element sums in the same order, and the profiles below check the stored
# outputs with one thread of every library anyway.
SUITES := test check chapter reader-suites computed-suites process-suites unit multiprocess package nbval \
          nbval-profiles nbval-avx2 nbval-baseline nbval-load colab book-strict browser
$(SUITES): export OMP_WAIT_POLICY := PASSIVE
$(SUITES): export OPENBLAS_NUM_THREADS := 1

reader-suites: $(STAMP) dot-ok chromium-ok
	$(MAKE) --no-print-directory -j1 book-strict browser

computed-suites: $(STAMP) dot-ok
	$(MAKE) --no-print-directory -j1 unit nbval-avx2

process-suites: $(STAMP)
	$(MAKE) --no-print-directory -j1 multiprocess package

# ruff's linter and formatter check (configured in pyproject.toml); fix with
# `.venv/bin/ruff check --fix . && .venv/bin/ruff format .`; then actionlint
# on the GitHub workflows.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/actionlint .github/workflows/*.yml

# The 124M-parameter check against transformers (marked full_size, 5 GB, ~45 s)
# is chapter 9's notebook cell too, which nbval runs; `make unit` leaves the
# test's copy out (run it with `pytest -m full_size tests`).
# The tests that start processes (torch.distributed workers, torchrun) run
# in `make multiprocess`, and the wheel's install in `make package`.
MULTIPROCESS_TESTS := tests/test_distributed.py tests/test_ddp_train.py tests/test_scale_out.py \
                      tests/test_collectives.py tests/test_tensor_parallel.py tests/test_vocab_parallel.py \
                      tests/test_pipeline.py tests/test_model_parallel_train.py

unit: $(STAMP) dot-ok
	$(TIMED) $(BIN)/pytest tests --ignore=tests/browser --ignore=tests/colab --ignore=tests/package \
	    $(addprefix --ignore=,$(MULTIPROCESS_TESTS)) -q -n 2 --durations=8 -m "not full_size"

# One test at a time: two of these tests side by side (a torchrun launch
# beside a group of run_workers) once broke a gloo mesh ("Connection closed
# by peer" while connecting), which no single test does alone.
multiprocess: $(STAMP)
	$(TIMED) $(BIN)/pytest $(MULTIPROCESS_TESTS) -q -p no:xdist --durations=4

# The wheel built from this checkout, installed with its dependencies (from
# PyPI, through pip's cache) into an empty venv: every engine must import.
package: $(STAMP)
	$(TIMED) $(BIN)/pytest tests/package -q

# nbval takes the longest notebooks first: xdist then hands out the rest as
# workers free up (--no-loadscope-reorder keeps this order), and both workers
# finish at about the same time.
SLOW_NOTEBOOKS  := $(addprefix notebooks/,09_gpt2_124m.ipynb 06_gpt_backward.ipynb \
                     08_backprop_at_scale.ipynb 12_model_parallel.ipynb \
                     07_debugging_backward.ipynb 03_forward_vs_reverse.ipynb)
NBVAL_NOTEBOOKS := $(foreach nb,$(SLOW_NOTEBOOKS),$(filter $(nb),$(NOTEBOOKS))) \
                   $(filter-out $(SLOW_NOTEBOOKS),$(NOTEBOOKS))
NBVAL_RUN       := $(BIN)/pytest $(NBVAL_FLAGS) -n 2 --dist loadscope --no-loadscope-reorder -q

nbval: $(STAMP) dot-ok
	$(TIMED) $(NBVAL_RUN) $(NBVAL_NOTEBOOKS)

# The stored outputs must read the same on any x86-64 CPU and thread count.
# NumPy, OpenBLAS, PyTorch and glibc's math library pick SIMD kernels at run
# time, and round-off follows them; switching kernels off (which works on any
# CPU, unlike switching them on) shows what another machine prints.  PyTorch's
# matmuls run in MKL and oneDNN, which ignore ATEN_CPU_CAPABILITY: they take
# their own caps (MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA).  Without them
# an Intel AVX-512 machine ran float64 matmuls down a path no profile covered.  `nbval`
# above runs natively, with PyTorch's default threads; these two runs, with one
# thread, cover an AVX2 machine and an older one (SSE only: no AVX, no FMA).
# On a CPU without AVX-512 the AVX2 profile is its native kernels.
ONE_THREAD       := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
PROFILE_AVX2     := NPY_DISABLE_CPU_FEATURES=X86_V4,AVX512_ICL ATEN_CPU_CAPABILITY=avx2 \
                    MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2
PROFILE_BASELINE := NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL ATEN_CPU_CAPABILITY=default \
                    MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \
                    OPENBLAS_CORETYPE=Sandybridge GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA

nbval-profiles: nbval-avx2 nbval-baseline

nbval-avx2: $(STAMP) dot-ok
	$(TIMED) $(PROFILE_AVX2) $(ONE_THREAD) $(NBVAL_RUN) $(NBVAL_NOTEBOOKS)

nbval-baseline: $(STAMP) dot-ok
	$(TIMED) $(PROFILE_BASELINE) $(ONE_THREAD) $(NBVAL_RUN) $(NBVAL_NOTEBOOKS)

# Every chapter with a measurement cell (one that opens with "# Measurement"),
# three times in a row while one busy process per core competes for the CPU
# (scripts/under_load.py starts them and always stops them): the conclusions
# checked next to the measurements must hold on a loaded machine.  Several
# minutes, so not part of `make test`.
LOAD_NOTEBOOKS = $(shell grep -l '# Measurement' $(NOTEBOOKS))

nbval-load: $(STAMP) dot-ok
	$(BIN)/python scripts/under_load.py --repeat 3 -- $(NBVAL_RUN) $(LOAD_NOTEBOOKS)

# Every notebook alone in an empty folder, in an environment without the
# package: its setup cell must install it, as on Colab (tests/colab).  One
# thread per library: beside the other suites, kernels with a thread per core
# spun waiting for each other and took five times as long.
colab: $(STAMP) dot-ok
	$(TIMED) $(ONE_THREAD) $(BIN)/pytest tests/colab -n 2 -q

book-strict: $(STAMP)
	$(TIMED) $(BIN)/jupyter-book build . --all $(BOOK_FLAGS)

# Two browsers side by side (see tests/browser/conftest.py): the tests mostly
# wait on page loads, MathJax and axe, so two overlap their waits.  (In make
# test one browser used 40 fewer CPU-seconds, but its lane then ended last,
# with a core idle for its final minute: 676 s against 655.)
browser: $(STAMP) chromium-ok
	$(TIMED) CHROMIUM=$(CHROMIUM) $(BIN)/pytest tests/browser -q -n 2 --dist loadgroup

# The inner loop while working on one chapter, in minutes: `make check`
# (lint and the unit tests) and `make chapter CH=06` (re-execute chapter 06,
# store it as JupyterLab saves it, check its outputs with nbval as make test
# does, then run the tests of the package modules it imports and of its
# conventions; scripts/chapter.py finds them).  make test stays the gate.
check: lint unit

CH ?=
chapter: $(STAMP) dot-ok
	@nb=$$($(BIN)/python scripts/chapter.py notebook "$(CH)") && \
	  tests=$$($(BIN)/python scripts/chapter.py tests "$(CH)") && \
	  stem=$$(basename $$nb .ipynb) && \
	  serial=$$(for t in $$tests; do case " $(MULTIPROCESS_TESTS) " in *" $$t "*) echo $$t;; esac; done) && \
	  parallel=$$(for t in $$tests; do case " $(MULTIPROCESS_TESTS) " in *" $$t "*) ;; *) echo $$t;; esac; done) && \
	  echo "make chapter: $$nb" && \
	  (cd notebooks && ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	     --ExecutePreprocessor.record_timing=False $$(basename $$nb)) && \
	  $(BIN)/python scripts/lab_form.py $$nb && \
	  $(TIMED) $(PROFILE_AVX2) $(ONE_THREAD) $(BIN)/pytest $(NBVAL_FLAGS) -q $$nb && \
	  $(BIN)/pytest -q -n 2 -m "not full_size" $$parallel && \
	  $(BIN)/pytest -q -n 2 tests/conventions/test_notebooks.py tests/conventions/test_live_workbench.py \
	    tests/conventions/test_show_targets.py -k "$$stem" && \
	  { [ -z "$$serial" ] || $(BIN)/pytest -q -p no:xdist $$serial; }

# Re-execute every notebook top to bottom in a fresh kernel and store its
# outputs (and widget state) - run after changing a chapter or the package -
# in the form JupyterLab saves (scripts/lab_form.py), so that opening and
# saving a chapter in `make lab` changes no byte of it.
notebooks: $(STAMP) dot-ok
	cd notebooks && for nb in $(notdir $(NOTEBOOKS)); do \
	  ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.record_timing=False "$$nb" || exit 1; done
	$(BIN)/python scripts/lab_form.py $(NOTEBOOKS)

# Benchmarks compare with other engines, which the book itself does not need.
# They write benchmarks/results/*.json, and report.py the tables and chart
# that book/performance.md includes.
bench: $(STAMP)
	$(BIN)/pip install --quiet micrograd==0.1.0
	$(BIN)/python benchmarks/scalar_engine.py
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

# pip installs one package at a time, on one core: two runs side by side
# take every other pin each, without dependencies (requirements.txt lists
# them all), then one run checks that every pin and dependency is met and
# adds the package.  58 s + 12 s on 2 cores, against 84 s + 7 s in one run.
PIP := $(BIN)/pip install --quiet --disable-pip-version-check

$(STAMP): requirements.txt pyproject.toml | python-ok
	$(PYTHON) -m venv $(VENV)
	awk '/^[A-Za-z0-9]/ { print > (++n % 2 ? "$(VENV)/pins-odd.txt" : "$(VENV)/pins-even.txt") }' \
	    requirements.txt
	$(PIP) --no-deps -r $(VENV)/pins-odd.txt & odd=$$!; \
	  $(PIP) --no-deps -r $(VENV)/pins-even.txt; even=$$?; \
	  wait $$odd && exit $$even
	$(PIP) -r requirements.txt -e .
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
