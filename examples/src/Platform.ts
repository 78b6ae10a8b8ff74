/**
 * The platform, played locally: it invokes a function handler, stops it at the time limit (the
 * abort interrupts the handler, as Netlify ends a function that runs past its limit), and retries a
 * failed invocation (cut off, 409, 429 or 5xx) after the next delay of its schedule, or later when
 * the response says `Retry-After`. Netlify retries a failed asynchronous invocation twice, after
 * one and then two minutes; the demo shortens the delays.
 */
import type { NetlifyFunction } from "@effect-idempotency/netlify"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Journal from "./Journal.js"

export interface Options {
  readonly timeLimit: Duration.DurationInput
  /** One delay per retry: `[1 minute, 2 minutes]` on Netlify. */
  readonly retryDelays: ReadonlyArray<Duration.DurationInput>
}

export interface Response {
  readonly status: number
  readonly body: string
  /** `Idempotent-Replayed: true`: the function replayed a recorded outcome. */
  readonly replayed: boolean
  readonly retryAfterSeconds: number | undefined
}

export interface Attempt {
  readonly attempt: number
  /** Milliseconds since the start of the run. */
  readonly startedAt: number
  readonly durationMs: number
  /** `None`: the platform cut the attempt off at the time limit. */
  readonly response: Option.Option<Response>
}

export interface Invocation {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

const retryable = (attempt: Attempt): boolean =>
  Option.match(attempt.response, {
    onNone: () => true,
    onSome: (response) => response.status === 409 || response.status === 429 || response.status >= 500
  })

/** A problem body (RFC 9457) as its title and detail; any other body as it is. */
export const describeBody = (body: string): string => {
  const problem = Schema.decodeUnknownOption(Schema.parseJson(Problem))(body)
  return Option.match(problem, { onNone: () => body, onSome: (p) => `${p.title}: ${p.detail}` })
}

const Problem = Schema.Struct({ title: Schema.String, detail: Schema.String })

const summarize = (response: Response): string =>
  `${response.status}${response.replayed ? " (Idempotent-Replayed: true)" : ""} ${describeBody(response.body)}`

export const run = (
  handler: NetlifyFunction.Handler,
  invocation: Invocation,
  options: Options,
  journal: Journal.Journal
): Effect.Effect<ReadonlyArray<Attempt>> =>
  Effect.gen(function*() {
    const attempts: Array<Attempt> = []
    const timeLimit = Duration.decode(options.timeLimit)
    // bounded: the first invocation and one retry per delay
    for (let n = 1; n <= options.retryDelays.length + 1; n++) {
      const startedAt = yield* journal.elapsed
      yield* journal.add("platform", `invocation #${n}`)
      const [elapsed, response] = yield* Effect.timed(
        Effect.promise((signal) =>
          handler(
            new Request(invocation.url, {
              method: "POST",
              headers: invocation.headers,
              body: invocation.body,
              signal
            }),
            { requestId: `req-${n}` }
          ).then(async (response): Promise<Response> => {
            const retryAfter = response.headers.get("retry-after")
            return {
              status: response.status,
              body: await response.text(),
              replayed: response.headers.get("idempotent-replayed") === "true",
              retryAfterSeconds: retryAfter === null ? undefined : Number(retryAfter)
            }
          })
        ).pipe(Effect.timeoutOption(timeLimit))
      )
      const attempt: Attempt = { attempt: n, startedAt, durationMs: Math.round(Duration.toMillis(elapsed)), response }
      attempts.push(attempt)
      yield* journal.add(
        "platform",
        Option.match(response, {
          onNone: () => `invocation #${n} cut off at the ${Duration.toMillis(timeLimit)} ms time limit`,
          onSome: (response) => `invocation #${n} → ${summarize(response)}`
        })
      )
      if (!retryable(attempt) || n > options.retryDelays.length) break
      const delay = Duration.decode(options.retryDelays[n - 1])
      const retryAfter = Option.flatMap(response, (r) => Option.fromNullable(r.retryAfterSeconds))
      const wait = Option.match(retryAfter, {
        onNone: () => delay,
        onSome: (seconds) => Duration.max(delay, Duration.seconds(seconds))
      })
      yield* journal.add(
        "platform",
        `retrying in ${Duration.toMillis(wait)} ms${Option.isSome(retryAfter) ? " (Retry-After)" : ""}`
      )
      yield* Effect.sleep(wait)
    }
    return attempts
  })
