# Two commands after a clone: `make demo` and `make test`. Both set up .venv first.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
EXTRAS := demo,minilm,multilingual,llama-index-milvus,langchain-milvus,plot,rerank,test,server,stores
# The second Milvus Lite engine, apart from the venv's 2.5.1 (both are the distribution
# milvus-lite): the tests of 3.x compatibility and the benchmarks put it first on PYTHONPATH.
LITE3  := .bench/milvus-lite-3.2.2
LITE3_PACKAGES := milvus-lite==3.2.2 faiss-cpu==1.15.1 pyarrow==26.0.1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test lint bench venv clean

venv: $(STAMP)

# torch first, pinned: pip takes the CPU build; a bare `torch` would pull a CUDA build.
$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip 'setuptools<81' wheel
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	$(PY) -m pip install --quiet --upgrade --no-deps --target $(LITE3) $(LITE3_PACKAGES)
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/thresholded demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) lint
	$(VENV)/bin/pytest -q

# Every benchmark (about an hour on 2 cores); figures in docs/benchmarks.md.
bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .thresholded .pytest_cache .bench
