/**
 * The library's spans and metrics, exported with OpenTelemetry: `@effect/opentelemetry`'s `NodeSdk`
 * layer, given the exporters of your backend (OTLP, Prometheus, a console exporter...). Provide it
 * once, next to your store; every run of an idempotent operation then starts a span named after the
 * operation, and counts in `idempotency.attempts` and `idempotency.attempt.duration` (see the
 * README's "Operations" section for the names and attributes).
 */
import { NodeSdk } from "@effect/opentelemetry"
import type { MetricReader } from "@opentelemetry/sdk-metrics"
import type { SpanProcessor } from "@opentelemetry/sdk-trace-base"

export const layer = (options: {
  readonly serviceName: string
  readonly spanProcessor: SpanProcessor
  readonly metricReader: MetricReader
}) =>
  NodeSdk.layer(() => ({
    resource: { serviceName: options.serviceName },
    spanProcessor: options.spanProcessor,
    metricReader: options.metricReader
  }))
