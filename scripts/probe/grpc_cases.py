"""Hostile-client probe, section 1: bad inputs over gRPC (valid key, main server)."""
from common import *  # noqa: F401,F403
from registry import *  # noqa: F401,F403


# ==========================================================================
# 1. Bad inputs over gRPC (valid key, main server)
# ==========================================================================

GARBAGE = b"\xff" * 12 + b"garbage\x00\x01"  # a varint longer than 10 bytes: never valid

# Every method: garbage bytes are INVALID_ARGUMENT (convert.cc ParseMessage).
for _m in METHODS:
    add("grpc.garbage.%s" % _m, "INVALID_ARGUMENT",
        lambda m=_m: call(WORK_CH, m, GARBAGE, md())[0])

# A length-delimited field claiming more bytes than the message has.
add("grpc.truncated.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", b"\x0a\x40Once", md())[0])
add("grpc.truncated.Tokenize", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", b"\x0a\x40Once", md())[0])
# Field number 0 is invalid protobuf.
add("grpc.field-number-0.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", b"\x02\x01a" + with_text(b"hi", STOP_2), md())[0])
# An empty message: no prompt (the prompt is "Required").
add("grpc.empty-message.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", b"", md())[0])
add("grpc.empty-message.Complete", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", b"", md())[0])
add("grpc.empty-message.GetModelInfo(valid)", "OK",
    lambda: call(WORK_CH, "GetModelInfo", b"", md())[0])
add("grpc.empty-message.Tokenize(valid)", "OK",
    lambda: call(WORK_CH, "Tokenize", b"", md())[0])

# Invalid UTF-8 in string fields (proto3 strings must be UTF-8; the proto
# says "valid UTF-8" for text, stop strings and request_id).
BAD_UTF8 = b"caf\xc3(\xff\xfe"
add("grpc.utf8.Generate.text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(BAD_UTF8, STOP_2), md())[0])
add("grpc.utf8.Complete.text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", with_text(BAD_UTF8, STOP_2), md())[0])
add("grpc.utf8.Tokenize.text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", field_bytes(1, BAD_UTF8), md())[0])
add("grpc.utf8.Generate.stop", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", field_bytes(
        4, field_varint(1, 2) + field_bytes(2, BAD_UTF8))), md())[0])
add("grpc.utf8.Generate.request_id", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2 + field_bytes(7, BAD_UTF8)),
                 md())[0])
add("grpc.utf8.Generate.overlong-nul", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"a\xc0\x80b", STOP_2), md())[0])
add("grpc.utf8.Generate.surrogate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"a\xed\xa0\x80b", STOP_2), md())[0])


def chat_raw(messages_raw, extra=b""):
    """ChatRequest bytes: chat { messages... } + extra."""
    return field_bytes(1, messages_raw) + extra


def msg_raw(role, content):
    return field_bytes(1, field_bytes(1, role) + field_bytes(2, content))


add("grpc.utf8.Chat.content", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_raw(msg_raw(b"user", BAD_UTF8)), md())[0])
add("grpc.utf8.ChatComplete.role", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_raw(msg_raw(BAD_UTF8, b"hi")), md())[0])
add("grpc.utf8.RenderChat.content", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", msg_raw(b"user", BAD_UTF8), md())[0])
add("grpc.utf8.RenderChat.tools_json", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", msg_raw(b"user", b"hi") + field_bytes(2, b"[\xff]"),
                 md())[0])

# Empty prompts.
add("grpc.prompt.empty-text", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", pb.GenerateRequest(
        text="", stopping=pb.StoppingCriteria(max_tokens=2)), md())[0])


def _empty_ids():
    r = pb.GenerateRequest(stopping=pb.StoppingCriteria(max_tokens=2))
    r.token_ids.SetInParent()
    return r


add("grpc.prompt.empty-token_ids", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", _empty_ids(), md())[0])
# Text at most 1 MiB.
MIB = 1 << 20
add("grpc.prompt.text-1MiB+1", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="a" * (MIB + 1)), md())[0])
add("grpc.prompt.text-1MiB+1.Complete", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", gen(text="a" * (MIB + 1)), md())[0])
add("grpc.Tokenize.text-1MiB+1", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", pb.TokenizeRequest(text="a" * (MIB + 1)), md())[0])
# Exactly 1 MiB is allowed: Tokenize answers (within 30 s).
add("grpc.Tokenize.text-1MiB(valid)", "OK",
    lambda: call(WORK_CH, "Tokenize", pb.TokenizeRequest(text=("Once upon a time. " * 60000)[:MIB]),
                 md(), timeout=30)[0])
# A text prompt of 1 MiB is past the context once tokenized.
add("grpc.prompt.text-1MiB-past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="a" * MIB), md(), timeout=30)[0])
# A message past gRPC's default 4 MiB receive limit: gRPC's own RESOURCE_EXHAUSTED.
add("grpc.message-5MiB", "RESOURCE_EXHAUSTED",
    lambda: call(WORK_CH, "Tokenize", field_bytes(9, b"x" * (5 * MIB)), md(), timeout=30)[0])


def ids_req(ids, max_tokens=1):
    return pb.GenerateRequest(token_ids=pb.TokenIds(ids=ids),
                              stopping=pb.StoppingCriteria(max_tokens=max_tokens))


for _name, _ids in [("negative", [1, -1]), ("vocab", [1, VOCAB]), ("int32-max", [1, 2**31 - 1]),
                    ("int32-min", [1, -2**31])]:
    add("grpc.token_ids.%s" % _name, "INVALID_ARGUMENT",
        lambda ids=_ids: call(WORK_CH, "Generate", ids_req(ids), md())[0])
    add("grpc.Detokenize.%s" % _name, "INVALID_ARGUMENT",
        lambda ids=_ids: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=ids), md())[0])
add("grpc.token_ids.vocab-1(valid)", "OK",
    lambda: call(WORK_CH, "Generate", ids_req([1, VOCAB - 1]), md())[0])
# "at most the context length" ids.
add("grpc.Detokenize.context+1-ids", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=[5] * (CONTEXT + 1)), md())[0])
add("grpc.Detokenize.context-ids(valid)", "OK",
    lambda: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=[5] * CONTEXT), md())[0])
# prompt + max_tokens must fit the context.
add("grpc.token_ids.context-1+1(valid)", "OK",
    lambda: call(WORK_CH, "Complete", ids_req([5] * (CONTEXT - 1), 1), md(), timeout=30)[0])
add("grpc.token_ids.context+1", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", ids_req([5] * CONTEXT, 1), md())[0])
add("grpc.token_ids.past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", ids_req([5] * (CONTEXT + 1), 1), md())[0])
add("grpc.max_tokens.past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="Once", max_tokens=CONTEXT), md())[0])
add("grpc.max_tokens.int32-max", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(max_tokens=2**31 - 1), md())[0])
add("grpc.max_tokens.0", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(max_tokens=0), md())[0])
add("grpc.max_tokens.negative", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(max_tokens=-5), md())[0])
add("grpc.text.past-context-after-tokenizing", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", gen(text="Once upon a time " * 700), md())[0])

NAN, INF = float("nan"), float("inf")
SAMPLING_BAD = [
    ("temperature", NAN), ("temperature", INF), ("temperature", -INF), ("temperature", -0.5),
    ("temperature", 100.5),
    ("top_p", 0.0), ("top_p", -0.1), ("top_p", 1.01), ("top_p", NAN),
    ("min_p", -0.01), ("min_p", 1.01), ("min_p", NAN), ("min_p", INF),
    ("repetition_penalty", 0.0), ("repetition_penalty", -1.0), ("repetition_penalty", 10.5),
    ("repetition_penalty", NAN),
    ("presence_penalty", 2.5), ("presence_penalty", -2.5), ("presence_penalty", NAN),
    ("frequency_penalty", 2.5), ("frequency_penalty", -INF),
    ("top_k", -1), ("top_k", VOCAB + 1), ("top_k", -2**31),
]
SAMPLING_GOOD = [("temperature", 100.0), ("temperature", 0.0), ("top_p", 1.0), ("min_p", 1.0),
                 ("repetition_penalty", 10.0), ("presence_penalty", -2.0),
                 ("frequency_penalty", 2.0), ("top_k", VOCAB), ("seed", 2**64 - 1)]
for _f, _v in SAMPLING_BAD:
    add("grpc.sampling.%s=%s" % (_f, _v), "INVALID_ARGUMENT",
        lambda f=_f, v=_v: call(WORK_CH, "Generate", gen(sampling=pb.SamplingParams(**{f: v})),
                                md())[0])
for _f, _v in SAMPLING_GOOD:
    add("grpc.sampling.%s=%s(valid)" % (_f, _v), "OK",
        lambda f=_f, v=_v: call(WORK_CH, "Generate", gen(sampling=pb.SamplingParams(**{f: v})),
                                md())[0])


def stop_req(stop=(), ids=()):
    return pb.GenerateRequest(text="Once upon a time", stopping=pb.StoppingCriteria(
        max_tokens=2, stop=list(stop), stop_token_ids=list(ids)))


for _name, _stop, _ids, _want in [
        ("stop.9-strings", ["s%d" % i for i in range(9)], [], "INVALID_ARGUMENT"),
        ("stop.8-strings(valid)", ["s%d" % i for i in range(8)], [], "OK"),
        ("stop.257-bytes", ["x" * 257], [], "INVALID_ARGUMENT"),
        ("stop.256-bytes(valid)", ["x" * 256], [], "OK"),
        ("stop.257-bytes-multibyte", ["\u00e9" * 128 + "x"], [], "INVALID_ARGUMENT"),
        ("stop.empty-string", [""], [], "INVALID_ARGUMENT"),
        ("stop_token_ids.33", [], list(range(33)), "INVALID_ARGUMENT"),
        ("stop_token_ids.32(valid)", [], list(range(32)), "OK"),
        ("stop_token_ids.negative", [], [-1], "INVALID_ARGUMENT"),
        ("stop_token_ids.vocab", [], [VOCAB], "INVALID_ARGUMENT")]:
    add("grpc.%s" % _name, _want,
        lambda s=_stop, i=_ids: call(WORK_CH, "Generate", stop_req(s, i), md())[0])

for _name, _kw, _want in [
        ("top_logprobs=-1", {"top_logprobs": -1}, "INVALID_ARGUMENT"),
        ("top_logprobs=21", {"top_logprobs": 21}, "INVALID_ARGUMENT"),
        ("top_logprobs=20(valid)", {"top_logprobs": 20}, "OK"),
        ("request_id=129-bytes", {"request_id": "r" * 129}, "INVALID_ARGUMENT"),
        ("request_id=128-bytes(valid)", {"request_id": "r" * 128}, "OK"),
        ("priority=1000001", {"priority": 1000001}, "INVALID_ARGUMENT"),
        ("priority=-1000001", {"priority": -1000001}, "INVALID_ARGUMENT"),
        ("priority=int32-min", {"priority": -2**31}, "INVALID_ARGUMENT"),
        ("priority=1000000(valid)", {"priority": 1000000}, "OK"),
        ("priority=-1000000(valid)", {"priority": -1000000}, "OK")]:
    add("grpc.%s" % _name, _want, lambda kw=_kw: call(WORK_CH, "Generate", gen(**kw), md())[0])
# The same bounds through Complete and Chat.
add("grpc.Complete.top_logprobs=21", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Complete", gen(top_logprobs=21), md())[0])


def chat_req(messages=(("user", "hi"),), max_tokens=2, tools_json="", **kw):
    return pb.ChatRequest(
        chat=pb.RenderChatRequest(messages=[pb.ChatMessage(role=r, content=c) for r, c in messages],
                                  tools_json=tools_json),
        stopping=pb.StoppingCriteria(max_tokens=max_tokens), **kw)


add("grpc.Chat(valid)", "OK", lambda: call(WORK_CH, "Chat", chat_req(), md())[0])
add("grpc.Chat.no-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(messages=()), md())[0])
add("grpc.Chat.no-chat-field", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", pb.ChatRequest(), md())[0])
add("grpc.ChatComplete.no-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=()), md())[0])
add("grpc.RenderChat.no-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", pb.RenderChatRequest(), md())[0])
add("grpc.Chat.empty-role", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(messages=(("", "hi"),)), md())[0])
add("grpc.RenderChat.empty-role", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", chat_req(messages=(("", "hi"),)).chat, md())[0])
# CONTRACT UNCLEAR: the proto lists roles as "system, user, assistant,
# tool..." (open-ended) and the server only requires a non-empty role; what
# an unknown role does is up to the chat template (Qwen2.5 skips it). Taken
# as accepted.
add("grpc.Chat.unknown-role(accepted)", "OK",
    lambda: call(WORK_CH, "Chat", chat_req(messages=(("user", "hi"), ("hacker", "x"))), md())[0])
add("grpc.Chat.content-over-1MiB", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=(("user", "a" * MIB), ("user", "b"))),
                 md())[0])
# Content of at most 1 MiB is accepted by RenderChatPrompt, but the Qwen
# template then writes more than its 1 MiB output limit. chat_renderer.h:
# "Errors are INVALID_ARGUMENT with a message for the client"; the request
# can never succeed, so INVALID_ARGUMENT, not RESOURCE_EXHAUSTED (a
# retryable "some resource has been exhausted").
add("grpc.ChatComplete.content-1MiB-renders-over-limit", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=(("user", "a" * MIB),)), md())[0])
add("grpc.RenderChat.content-1MiB-renders-over-limit", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "RenderChat", chat_req(messages=(("user", "a" * MIB),)).chat, md())[0])
add("grpc.Chat.tools_json-malformed", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(tools_json="[{"), md())[0])
add("grpc.Chat.tools_json-object", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(tools_json='{"a": 1}'), md())[0])
add("grpc.Chat.tools_json-nested-100k", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(tools_json="[" * 100000 + "]" * 100000), md())[0])
add("grpc.Chat.temperature-nan", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(sampling=pb.SamplingParams(temperature=NAN)), md())[0])
add("grpc.Chat.max_tokens-past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(max_tokens=CONTEXT), md())[0])
add("grpc.Chat.request_id-129", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", chat_req(request_id="r" * 129), md())[0])
add("grpc.ChatComplete.stop_token_ids-vocab", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", pb.ChatRequest(
        chat=chat_req().chat, stopping=pb.StoppingCriteria(max_tokens=2, stop_token_ids=[VOCAB])),
        md())[0])

# Deeply nested unknown groups (wire types 3/4): protobuf's recursion limit
# (100) makes 100,000 levels a parse error; 50 levels are unknown fields,
# which proto3 keeps and the server ignores.
GROUP_START, GROUP_END = varint((100 << 3) | 3), varint((100 << 3) | 4)


def nested_groups(depth):
    return GROUP_START * depth + GROUP_END * depth


add("grpc.nested-groups-100k.Generate", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) + nested_groups(100000), md())[0])
add("grpc.nested-groups-100k.Tokenize", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Tokenize", nested_groups(100000), md())[0])
add("grpc.nested-groups-100k.Chat", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Chat", ser(chat_req()) + nested_groups(100000), md())[0])
add("grpc.nested-groups-50(unknown,accepted)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) + nested_groups(50), md())[0])
# Nested length-delimited submessages inside an unknown field: opaque bytes.
add("grpc.nested-unknown-bytes(accepted)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) +
                 field_bytes(200, b"\x0a\x02\x0a\x00" * 1000), md())[0])

# Huge repeated fields.
add("grpc.huge.token_ids-1M", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", ids_req([5] * 1000000), md(), timeout=30)[0])
add("grpc.huge.Detokenize-1M-ids", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Detokenize", pb.DetokenizeRequest(token_ids=[5] * 1000000), md(),
                 timeout=30)[0])
add("grpc.huge.stop-100k-strings", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", stop_req(["s"] * 100000), md(), timeout=30)[0])
add("grpc.huge.stop_token_ids-500k", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "Generate", stop_req((), [5] * 500000), md(), timeout=30)[0])
# 100,000 short messages: content is small, the rendered prompt is far past
# the context (and past the template's output limit): INVALID_ARGUMENT, as
# for content-1MiB-renders-over-limit.
add("grpc.huge.chat-100k-messages", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=[("user", "hi")] * 100000), md(),
                 timeout=60)[0])
add("grpc.huge.chat-20k-messages-past-context", "INVALID_ARGUMENT",
    lambda: call(WORK_CH, "ChatComplete", chat_req(messages=[("user", "hi")] * 20000), md(),
                 timeout=60)[0])
add("grpc.huge.unknown-repeated-1M(accepted)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) +
                 field_bytes(300, varint(1) * 1000000), md(), timeout=30)[0])

# Unknown fields are accepted (proto3 forward compatibility).
# NUL and other control characters are valid UTF-8: a valid prompt.
add("grpc.text-with-NUL-and-controls(valid)", "OK",
    lambda: call(WORK_CH, "Generate", gen(text="a\x00b\x01\x1b[2J\x7f\u2028\ufeffc"), md())[0])
add("grpc.Tokenize.NUL-only(valid)", "OK",
    lambda: call(WORK_CH, "Tokenize", pb.TokenizeRequest(text="\x00" * 1000), md())[0])
add("grpc.unknown-field.Generate", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) + field_varint(99, 7), md())[0])
add("grpc.unknown-field.SamplingParams", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2 + field_bytes(
        3, field_varint(77, 1) + field_bytes(78, b"zz"))), md())[0])
add("grpc.unknown-field.Tokenize", "OK",
    lambda: call(WORK_CH, "Tokenize", field_bytes(1, b"hi") + field_varint(50, 1), md())[0])
add("grpc.unknown-field.GetModelInfo", "OK",
    lambda: call(WORK_CH, "GetModelInfo", field_bytes(5, b"x"), md())[0])
add("grpc.unknown-field.ChatComplete", "OK",
    lambda: call(WORK_CH, "ChatComplete", ser(chat_req()) + field_varint(40, 3), md())[0])
# Both oneof members on the wire: the last one wins (protobuf), a valid request.
add("grpc.oneof-both-members(valid)", "OK",
    lambda: call(WORK_CH, "Generate", with_text(b"Once", STOP_2) +
                 field_bytes(2, ser(pb.TokenIds(ids=[1, 5]))), md())[0])
