# zerohop — the only build entry. Out-of-tree into build/.
#
#   make          build build/zerohop (one binary, subcommands) and the BPF objects
#   make deps     install what is missing, from Debian packages only (idempotent)
#   make check    deps + build + every test (unit under ASan/UBSan, lab e2e, lint, the
#                 tour from a fresh machine's state) under prove
#   make demo     deps + build + doctor + lab up + tour + seed experiments + lab down
#   make unit     unit tests only;  make e2e   lab tests only
#
# Adding code needs no edit here: every src/**/*.c is part of the binary,
# every bpf/*.bpf.c becomes build/bpf/NAME.bpf.o plus a skeleton header
# build/bpf/NAME.skel.h, every tests/unit/**/test_*.c becomes one TAP test
# binary linked with the ASan/UBSan build of src/ (minus the CLI entry point),
# every tests/e2e/*.t and tests/lint/*.t script runs under prove (lint:
# checks over the tree itself, such as tests/lint/paths.t).

B        := build
CC       ?= gcc
CLANG    ?= clang
BPFTOOL  ?= bpftool
ARCH     := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
MULTIARCH := $(shell $(CC) -dumpmachine)

# Evaluated when used (=, not :=): on a fresh machine pkg-config and the
# libraries only exist once the deps target has run.
PKGS     := libbpf yaml-0.1 libelf zlib openssl libnghttp2
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN     := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wshadow -Wformat=2
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -I$(B)/bpf $(PKG_CFLAGS) -MMD -MP
LDLIBS   += $(PKG_LIBS) -lm -lpthread
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Iinclude -Ibpf \
	-I/usr/include/$(MULTIARCH) -Wall -Wno-unused-function

SRCS     := $(shell find src -name '*.c' | sort)
CLI_MAIN := src/cli/main.c
LIB_SRCS := $(filter-out $(CLI_MAIN),$(SRCS))
OBJS     := $(SRCS:%.c=$(B)/obj/%.o)
SAN_OBJS := $(LIB_SRCS:%.c=$(B)/san/%.o)

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(BPF_SRCS:bpf/%.bpf.c=$(B)/bpf/%.bpf.o)
BPF_SKELS := $(BPF_SRCS:bpf/%.bpf.c=$(B)/bpf/%.skel.h)

UNIT_SRCS := $(shell find tests/unit -name 'test_*.c' 2>/dev/null | sort)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/unit/%.t)
TEST_LIB_SRCS := $(wildcard tests/lib/*.c)
TEST_LIB_OBJS := $(TEST_LIB_SRCS:%.c=$(B)/san/%.o)

# Helper programs used by the e2e tests (plain build, no sanitizers: they run in pods).
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tests/tools/%.c=$(B)/tests/tools/%)

# Fuzz targets (clang libFuzzer), built only by `make fuzz`.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
LIB_SRCS_FUZZ := src/lib/h1.c src/lib/log.c

DEPS_STAMP := $(B)/.deps-ok

PROVE    := prove --exec '' --timer --failures
E2E      := $(sort $(wildcard tests/e2e/*.t tests/lint/*.t))

.PHONY: all deps check unit e2e demo clean fuzz tools
# Keep intermediate objects (the sanitizer build) between runs.
.SECONDARY:
all: $(B)/zerohop $(B)/zerohop-cni $(TOOL_BINS)

# The CNI plugin is the same binary under the name runtimes run (cni.h).
$(B)/zerohop-cni: $(B)/zerohop
	ln -sf zerohop $@

deps: $(DEPS_STAMP)
$(DEPS_STAMP): scripts/deps.sh
	@bash scripts/deps.sh
	@mkdir -p $(B) && touch $@

# The binary depends on the skeletons (generated headers) being present first.
$(B)/zerohop: $(OBJS) | $(DEPS_STAMP)
	$(CC) $(CFLAGS) -o $@ $(OBJS) $(LDLIBS)

$(B)/obj/%.o: %.c | $(DEPS_STAMP) $(BPF_SKELS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(B)/san/%.o: %.c | $(DEPS_STAMP) $(BPF_SKELS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -Itests/lib -c -o $@ $<

$(B)/tests/unit/%.t: tests/unit/%.c $(SAN_OBJS) $(TEST_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -Itests/lib -o $@ $< $(SAN_OBJS) $(TEST_LIB_OBJS) $(LDLIBS)

$(B)/tests/tools/%: tests/tools/%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)
# Tools may include a BPF skeleton (accel_ctl compiles src/agent/accel.c in).
$(TOOL_BINS): | $(BPF_SKELS)

# netpol_load drives src/policy directly (the policy benchmark loads up to
# 50,000 policies without the agents parsing them): link it with the library objects.
NETPOL_LOAD_OBJS := $(filter $(B)/obj/src/policy/% $(B)/obj/src/model/% $(B)/obj/src/lib/% \
	$(B)/obj/src/state/% $(B)/obj/src/lab/% $(B)/obj/src/agent/accel.o,$(OBJS))
$(B)/tests/tools/netpol_load: tests/tools/netpol_load.c $(NETPOL_LOAD_OBJS) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(NETPOL_LOAD_OBJS) $(LDLIBS)
# ss_selfwatch drives src/state directly (tests/e2e/94-etcd-selfwatch.t).
$(B)/tests/tools/ss_selfwatch: tests/tools/ss_selfwatch.c $(NETPOL_LOAD_OBJS) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(NETPOL_LOAD_OBJS) $(LDLIBS)

$(B)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/lib/*.h) $(wildcard include/zerohop/abi/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(B)/bpf/%.skel.h: $(B)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< name zh_$(subst -,_,$*) > $@.tmp && mv $@.tmp $@

unit: $(UNIT_BINS)
	$(PROVE) $(UNIT_BINS)

e2e: all
	$(PROVE) $(E2E)

check: all $(UNIT_BINS)
	$(PROVE) $(UNIT_BINS) $(E2E)

# The doctor first: on a machine that cannot run the demo, its report (one
# line per missing piece, with the fix) is the whole output.
demo: all
	./$(B)/zerohop doctor
	ZH=$(CURDIR)/$(B)/zerohop bash scripts/tour.sh
	./$(B)/zerohop demo

fuzz: | $(DEPS_STAMP)
	@mkdir -p $(B)/fuzz
	@for f in $(FUZZ_SRCS); do n=$$(basename $$f .c); \
	  x=$$(sed -n 's/^ \* fuzz-link: //p' $$f); \
	  $(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE -Iinclude \
	    -o $(B)/fuzz/$$n $$f $(LIB_SRCS_FUZZ) $$x || exit 1; done

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
