#!/usr/bin/env python3
# `ptepack diff` lines two methods up before it compares them (docs/dump-and-verify.md, "How
# diff lines up two methods"): one change is listed once, not as every value and instruction
# after it. Each pair is written from a real fixture with tests/tools/pte_writer.py, the way an
# exporter would have written the other version: an argument inserted (the keyword spotter's
# quantized_avg_pool2d without the later ceil_mode, as an earlier public export has it), an
# instruction inserted, one constant changed, two values swapped with every reference, a method
# renamed. Each asserts the exact listing, the verdict and the exit code.
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_common import Suite  # noqa: E402
import pte_writer  # noqa: E402  (tests/tools is on sys.path through cli_common)

suite = Suite()
KWS = "portable_keyword_spotting"
AVG_POOL = 13  # the keyword spotter's cortex_m::quantized_avg_pool2d.out instruction
CEIL_MODE = 267  # its Bool argument ceil_mode (argument 4)


def fixture(ctx, stem):
    return os.path.join(ctx.data, "pte", stem + ".pte")


def value_references(plan):
    """Every place a plan names a value: (container, key) pairs whose item is an index."""
    refs = [(plan["inputs"], i) for i in range(len(plan.get("inputs", [])))]
    refs += [(plan["outputs"], i) for i in range(len(plan.get("outputs", [])))]
    for chain in plan.get("chains", []):
        for name in ("inputs", "outputs"):
            refs += [(chain[name], i) for i in range(len(chain.get(name, [])))]
        for ins in chain.get("instructions", []):
            args = ins["instr_args"]
            if "args" in args:
                refs += [(args["args"], i) for i in range(len(args["args"]))]
            for key in ("move_from", "move_to", "cond_value_index", "value_index"):
                if key in args:
                    refs.append((args, key))
    for value in plan["values"]:
        if value.get("val_type") in ("TensorList", "OptionalTensorList"):
            items = value["val"].get("items", [])
            refs += [(items, i) for i in range(len(items))]
    return refs


def renumber(plan, mapping):
    """Every value reference v becomes mapping(v) (-1, no value, stays)."""
    for container, key in value_references(plan):
        if container[key] >= 0:
            container[key] = mapping(container[key])


def written(ctx, directory, name, change, stem=KWS):
    program, segments = pte_writer.decode(fixture(ctx, stem))
    change(program, segments)
    return pte_writer.write(os.path.join(directory, name + ".pte"), program, segments)


def without_ceil_mode(program, segments):
    plan = program["execution_plan"][0]
    args = plan["chains"][0]["instructions"][AVG_POOL]["instr_args"]["args"]
    assert args[4] == CEIL_MODE and plan["values"][CEIL_MODE]["val_type"] == "Bool"
    del args[4]
    del plan["values"][CEIL_MODE]
    renumber(plan, lambda v: v - 1 if v > CEIL_MODE else v)


def with_instruction_repeated(program, segments):
    chain = program["execution_plan"][0]["chains"][0]["instructions"]
    chain.insert(AVG_POOL + 1, copy.deepcopy(chain[AVG_POOL]))


def with_constant_changed(program, segments):
    index = program["constant_segment"].get("segment_index", 0)
    blob = bytearray(segments[index])
    blob[program["constant_segment"]["offsets"][5] + 3] ^= 0x40
    segments[index] = bytes(blob)


def with_values_swapped(program, segments, first=268, second=269):
    plan = program["execution_plan"][0]
    values = plan["values"]
    values[first], values[second] = values[second], values[first]
    renumber(plan, lambda v: second if v == first else first if v == second else v)


def with_method_renamed(program, segments):
    for plan in program["execution_plan"]:
        if plan["name"] == "double":
            plan["name"] = "twice"


def listing(ctx, a, b, code, what):
    """The lines under `differences:` of `diff A B`, without their indent."""
    result = ctx.run("diff", a, b)
    ctx.code(result, code, what)
    lines = result.out.splitlines()
    if not any(line.startswith("differences: ") for line in lines):
        return []
    start = next(i for i, line in enumerate(lines) if line.startswith("differences: ")) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("programs: "))
    return [line[2:] for line in lines[start:end]]


@suite.test
def an_inserted_argument_is_one_argument_and_one_value(ctx):
    d = ctx.mkdir()
    old = written(ctx, d, "kws_old", without_ceil_mode)
    new = fixture(ctx, KWS)
    at = f"{KWS}.pte forward: "
    ctx.equal(listing(ctx, old, new, 1, "old -> new"), [
        at + "value 267 added (Bool false)",
        at + "instruction 13 cortex_m::quantized_avg_pool2d.out: argument 4 added (Bool false)",
    ], "the earlier export against today's")
    ctx.equal(listing(ctx, new, old, 1, "new -> old"), [
        "kws_old.pte forward: value 267 removed (Bool false)",
        "kws_old.pte forward: instruction 13 cortex_m::quantized_avg_pool2d.out: "
        "argument 4 removed (Bool false)",
    ], "today's export against the earlier one")
    doc = ctx.run("diff", old, new, "--json").json()
    ctx.equal(doc["equivalent"], False, "--json equivalent")
    ctx.equal([x["what"] for x in doc["differences"]], ["value", "instruction"], "--json what")


@suite.test
def an_inserted_instruction_is_one_instruction(ctx):
    d = ctx.mkdir()
    more = written(ctx, d, "kws_more", with_instruction_repeated)
    ctx.equal(listing(ctx, fixture(ctx, KWS), more, 1, "an instruction inserted"), [
        "kws_more.pte forward: instruction 14 cortex_m::quantized_avg_pool2d.out added "
        "(244, 260, 263, 266, 267, 268, 269, 270, 256, 257, 257)",
    ], "one instruction inserted")


@suite.test
def a_changed_constant_is_one_value(ctx):
    d = ctx.mkdir()
    changed = written(ctx, d, "kws_const", with_constant_changed)
    ctx.equal(listing(ctx, fixture(ctx, KWS), changed, 1, "a constant changed"),
              ["kws_const.pte forward: value 4 FLOAT [64]: bytes changed"], "one constant")


@suite.test
def two_values_swapped_with_every_reference_are_one_line(ctx):
    d = ctx.mkdir()
    swapped = written(ctx, d, "kws_swap", with_values_swapped)
    ctx.equal(listing(ctx, fixture(ctx, KWS), swapped, 1, "two values swapped"), [
        "kws_swap.pte forward: values reordered: 1 before values they followed "
        "(first: value 269 -> 268)",
    ], "two values swapped")
    # Swapped without their references: two values changed, each once.
    def contents_swapped(program, segments):
        values = program["execution_plan"][0]["values"]
        values[268], values[269] = values[269], values[268]
    crossed = written(ctx, d, "kws_cross", contents_swapped)
    lines = listing(ctx, fixture(ctx, KWS), crossed, 1, "two values' contents swapped")
    ctx.equal(len(lines), 2, f"two values changed: {lines}")


@suite.test
def values_rotated_are_counted_and_instructions_swapped_are_one_moved(ctx):
    d = ctx.mkdir()

    def rotated(program, segments):  # value 268 moved after 270: 269, 270, 268
        plan = program["execution_plan"][0]
        values = plan["values"]
        values.insert(270, values.pop(268))
        renumber(plan, lambda v: 270 if v == 268 else v - 1 if v in (269, 270) else v)
    rot = written(ctx, d, "kws_rot", rotated)
    ctx.equal(listing(ctx, fixture(ctx, KWS), rot, 1, "three values rotated"), [
        "kws_rot.pte forward: values reordered: 2 before values they followed "
        "(first: value 269 -> 268)",
    ], "three values rotated")

    def swapped(program, segments):  # cortex_m::pad.out and quantized_avg_pool2d.out
        chain = program["execution_plan"][0]["chains"][0]["instructions"]
        chain[12], chain[13] = chain[13], chain[12]
    swap = written(ctx, d, "kws_swapins", swapped)
    ctx.equal(listing(ctx, fixture(ctx, KWS), swap, 1, "two instructions swapped"), [
        "kws_swapins.pte forward: instruction 12 cortex_m::pad.out removed",
        "kws_swapins.pte forward: instruction 13 cortex_m::pad.out added "
        "(237, 249, 254, 255, 244, 244)",
    ], "two instructions swapped: the first moved after the second")


@suite.test
def a_renamed_method_is_removed_and_added_each_named_by_its_own_file(ctx):
    d = ctx.mkdir()
    renamed = written(ctx, d, "renamed", with_method_renamed, stem="portable_multi_method")
    result = ctx.run("diff", fixture(ctx, "portable_multi_method"), renamed)
    ctx.code(result, 1, "a method renamed")
    lines = result.out.splitlines()
    ctx.check("  + renamed.pte twice" in lines, f"added under its file: {lines}")
    ctx.check("  - portable_multi_method.pte double" in lines, f"removed under its file: {lines}")
    ctx.check("  ~ renamed.pte forward" not in lines, f"forward unchanged: {lines}")


@suite.test
def a_chain_of_tensor_lists_as_deep_as_the_values_is_no_crash(ctx):
    """A hostile program: 100,000 tensor lists, each naming the next, the first an output.
    Lining the values up follows the chain without recursion."""
    d = ctx.mkdir()

    def chain(program, segments, last=0):
        plan = program["execution_plan"][0]
        first = len(plan["values"])
        count = 100000
        for i in range(count):
            items = [first + i + 1] if i < count - 1 else [last]
            plan["values"].append({"val_type": "TensorList", "val": {"items": items}})
        plan["outputs"] = [first]
    deep = written(ctx, d, "deep", chain, stem="portable_add_no_header")
    other = written(ctx, d, "other", lambda p, s: chain(p, s, last=1),
                    stem="portable_add_no_header")
    ctx.code(ctx.run("diff", deep, deep, timeout=600), 0, "the chain against itself")
    lines = listing(ctx, deep, other, 1, "the chain's last item changed")
    ctx.equal(len(lines), 1, f"one difference: {lines}")


if __name__ == "__main__":
    suite.main()
