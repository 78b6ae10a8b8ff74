/**
 * The timeline of one run: what the platform, the function, the store and the downstream did, in
 * order, with times relative to the start of the run.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import type * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"

export type Source = "platform" | "function" | "store" | "downstream"

export interface Entry {
  /** Milliseconds since the start of the run. */
  readonly at: number
  readonly source: Source
  readonly text: string
}

export interface Journal {
  readonly startedAt: number
  readonly add: (source: Source, text: string) => Effect.Effect<void>
  readonly entries: Effect.Effect<ReadonlyArray<Entry>>
  /** Milliseconds since the start of the run. */
  readonly elapsed: Effect.Effect<number>
  /** A layer that sends the function's log lines (with their key and attempt) to the journal. */
  readonly logger: Layer.Layer<never>
}

const shown = ["attempt", "status", "key"]

export const make: Effect.Effect<Journal> = Effect.gen(function*() {
  const startedAt = yield* Clock.currentTimeMillis
  // appended to by the logger too, which runs synchronously outside any effect
  const entries: Array<Entry> = []
  const elapsed = Effect.map(Clock.currentTimeMillis, (now) => now - startedAt)
  const add = (source: Source, text: string) =>
    Effect.flatMap(elapsed, (at) => Effect.sync(() => void entries.push({ at, source, text })))
  const logger = Logger.make(({ annotations, date, message }) => {
    const parts = shown.flatMap((name) => {
      const value = HashMap.get(annotations, name)
      return value._tag === "Some" ? [`${name}=${String(value.value)}`] : []
    })
    const text = `${Array.isArray(message) ? message.join(" ") : String(message)}${
      parts.length > 0 ? `  (${parts.join(" ")})` : ""
    }`
    entries.push({ at: date.getTime() - startedAt, source: "function", text })
  })
  return {
    startedAt,
    add,
    entries: Effect.sync(() => [...entries].sort((a, b) => a.at - b.at)),
    elapsed,
    logger: Logger.replace(Logger.defaultLogger, logger)
  }
})
