"""An OpenAI client instrumented by OpenTelemetry's GenAI instrumentation (PyPI
`opentelemetry-instrumentation-openai-v2`), exporting OTLP/HTTP to `forktrail serve`
and, the same spans, as OTLP JSON Lines to a file (the file exporter's format): a
conversation that calls a tool, then the answer after the tool's result, asked twice
(a retry). Run by tests/it/otel.rs, which serves the model and forktrail."""

import base64
import json
import os

from openai import OpenAI
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from google.protobuf.json_format import MessageToDict


class JsonLinesExporter(SpanExporter):
    """Each export as one line of OTLP JSON: the SDK's own protobuf encoding in the
    protobuf JSON mapping, with the ids in hex and enums as numbers, as OTLP/JSON has
    them."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans) -> SpanExportResult:
        request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
        for resource in request.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64decode(span[key]).hex()
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(request) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


provider = TracerProvider()
exporter = OTLPSpanExporter(
    endpoint=os.environ["FORKTRAIL_OTLP_ENDPOINT"],
    headers={"Authorization": "Bearer " + os.environ["FORKTRAIL_TOKEN"]},
)
provider.add_span_processor(SimpleSpanProcessor(exporter))
provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(os.environ["FORKTRAIL_OTLP_FILE"])))
trace.set_tracer_provider(provider)
OpenAIInstrumentor().instrument()

client = OpenAI(base_url=os.environ["FORKTRAIL_MODEL_URL"], api_key="unused")
tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}]
messages = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is the weather in Paris?"},
]
with trace.get_tracer("forktrail-test").start_as_current_span("conversation") as span:
    first = client.chat.completions.create(model="test-model", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "18°C, cloudy"})
    answers = [
        client.chat.completions.create(model="test-model", messages=messages, tools=tools)
        .choices[0].message.content
        for _ in range(2)
    ]
    trace_id = format(span.get_span_context().trace_id, "032x")
provider.shutdown()
print(json.dumps({"trace_id": trace_id, "answers": answers}))
