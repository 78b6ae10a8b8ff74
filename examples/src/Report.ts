/**
 * The report of a scenario, as text for people and as one JSON object for scripts.
 */
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Platform from "./Platform.js"
import type * as Scenario from "./Scenario.js"

const ms = (duration: Duration.DurationInput) => `${Duration.toMillis(duration)} ms`

const pad = (value: number, width: number) => String(Math.round(value)).padStart(width)

const StoredValue = Schema.parseJson(Schema.Struct({
  status: Schema.Number,
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  body: Schema.Uint8ArrayFromBase64
}))

/** A recorded response as people read it: the status, the headers, and the body as text. */
const describeStored = (value: string): string =>
  Option.match(Schema.decodeUnknownOption(StoredValue)(value), {
    onNone: () => value,
    onSome: (stored) =>
      `${stored.status} ${JSON.stringify(stored.headers)} ${new TextDecoder().decode(stored.body)} ` +
      `(${stored.body.byteLength} bytes, kept as base64)`
  })

const outcomeOf = (attempt: Platform.Attempt): string =>
  Option.match(attempt.response, {
    onNone: () => "cut off by the platform at the time limit: no response",
    onSome: (response) =>
      `${response.status}${response.replayed ? " Idempotent-Replayed: true" : ""}${
        response.retryAfterSeconds === undefined ? "" : ` Retry-After: ${response.retryAfterSeconds}`
      }  ${Platform.describeBody(response.body)}`
  })

const finalState = (run: Scenario.Run): string =>
  run.records.length === 0
    ? "no record"
    : run.records.map((record) => `${record.status}, outcome ${record.outcome}, attempt ${record.attempt}`).join("; ")

const runText = (run: Scenario.Run, index: number): Array<string> => {
  const expected = run.name === "withoutIdempotency" ? undefined : 1
  const check = (count: number) => expected === undefined ? "" : count === expected ? "  ✓" : "  ✗ expected 1"
  const lines = [
    "",
    `── ${index + 1}. ${run.title} ${"─".repeat(Math.max(3, 100 - run.title.length))}`,
    `   client Idempotency-Key: ${run.key}`,
    "",
    `   attempts (${run.attempts.length}):`,
    ...run.attempts.map((attempt) =>
      `     #${attempt.attempt}  t=${pad(attempt.startedAt, 5)} ms  ${pad(attempt.durationMs, 5)} ms  ${
        outcomeOf(attempt)
      }`
    ),
    "",
    `   downstream records (orders table): ${run.orders.length}${check(run.orders.length)}${
      run.name === "withoutIdempotency" && run.orders.length > 1 ? "  ✗ duplicate write" : ""
    }`,
    ...run.orders.map((order) =>
      `     ${order.orderId}  ${order.sku} ×${order.quantity}  written t=${
        pad(order.writtenAt, 5)
      } ms by request #${order.request}  ${
        order.idempotencyKey === undefined ? "(no Idempotency-Key)" : `(Idempotency-Key ${order.idempotencyKey})`
      }`
    ),
    `   downstream requests: ${run.downstreamRequests.length}`,
    `   idempotency records: ${run.records.length}${check(run.records.length)}`,
    ...run.records.map((record) => `     ${record.id}`),
    ...(run.tableRows === undefined ? [] : [
      `   ${
        run.tableRowsLabel ?? "rows for this key in the store's table (SELECT count(*) … WHERE key = …)"
      }: ${run.tableRows}${check(run.tableRows)}`
    ]),
    `   final state: ${finalState(run)}`,
    ...run.records.flatMap((record) =>
      record.value === undefined ? [] : [`   stored response: ${describeStored(record.value)}`]
    ),
    `   a retry got the stored result: ${run.replayed ? `yes, from the ${run.replayedBy}` : "no"}`,
    "",
    "   timeline:",
    ...run.timeline.map((entry) => `     ${pad(entry.at, 5)} ms  ${entry.source.padEnd(10)}  ${entry.text}`),
    "",
    `   ${run.explanation}`
  ]
  return lines
}

/** The readable report. */
export const text = (report: Scenario.Report, failures: ReadonlyArray<string>): string =>
  [
    report.via === "server"
      ? "An HTTP server's route (HttpRouter, IdempotencyMiddleware) retried after a timeout: the downstream wrote, " +
        "but its answer came after the time limit."
      : "A Netlify function retried after a timeout: the downstream wrote, but its answer came after the time limit.",
    `store: ${report.store}`,
    `time limit ${ms(report.settings.timeLimit)}, margin ${ms(report.settings.margin)} (downstream timeout ${
      Duration.toMillis(report.settings.timeLimit) - Duration.toMillis(report.settings.margin)
    } ms), platform retries after ${report.settings.retryDelays.map(ms).join(", ")}`,
    `downstream: writes at once, answers its first request after ${
      Duration.toMillis(report.settings.timeLimit) + Duration.toMillis(report.settings.lateBy)
    } ms`,
    ...report.runs.flatMap(runText),
    "",
    "── result " + "─".repeat(100),
    ...report.runs.map((run) =>
      `   ${run.name.padEnd(20)} attempts ${run.attempts.length}  downstream records ${run.orders.length}  ` +
      `idempotency records ${run.records.length}  replayed ${run.replayed ? "yes" : "no"}`
    ),
    failures.length === 0
      ? "   ✓ the protected runs end with exactly one downstream record and one idempotency record"
      : failures.map((failure) => `   ✗ ${failure}`).join("\n"),
    ""
  ].join("\n")

const attemptJson = (attempt: Platform.Attempt) => ({
  attempt: attempt.attempt,
  startedAtMs: attempt.startedAt,
  durationMs: attempt.durationMs,
  ...Option.match(attempt.response, {
    onNone: () => ({ cutOff: true as const }),
    onSome: (response) => ({
      cutOff: false as const,
      status: response.status,
      replayed: response.replayed,
      ...(response.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: response.retryAfterSeconds }),
      body: response.body
    })
  })
})

/** The report as one JSON value. */
export const json = (report: Scenario.Report, failures: ReadonlyArray<string>) => ({
  store: report.store,
  via: report.via,
  settings: {
    timeLimitMs: Duration.toMillis(report.settings.timeLimit),
    marginMs: Duration.toMillis(report.settings.margin),
    retryDelaysMs: report.settings.retryDelays.map((delay) => Duration.toMillis(delay)),
    downstreamFirstAnswerMs: Duration.toMillis(report.settings.timeLimit) + Duration.toMillis(report.settings.lateBy)
  },
  ...Object.fromEntries(report.runs.map((run) => [run.name, {
    store: report.store,
    attempts: run.attempts.length,
    downstreamRecords: run.orders.length,
    idempotencyRecords: run.records.length,
    ...(run.tableRows === undefined ? {} : { idempotencyTableRows: run.tableRows }),
    replayed: run.replayed,
    replayedBy: run.replayedBy ?? null,
    timeoutPolicy: run.onTimeout ?? null,
    downstreamDeduplicates: run.dedupByKey,
    finalState: run.records.map((record) => ({ status: record.status, outcome: record.outcome })),
    attemptResults: run.attempts.map(attemptJson),
    downstreamOrders: run.orders,
    log: run.timeline.map((entry) => `${entry.at} ms ${entry.source}: ${entry.text}`)
  }])),
  ok: failures.length === 0,
  failures
})
