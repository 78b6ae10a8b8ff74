/**
 * `npm run orders-api`: the orders API on http://127.0.0.1:3000, its idempotency records and its
 * orders in an embedded PostgreSQL (PGlite), or in the database of `--pg-url` / `DATABASE_URL`.
 *
 *   npm run orders-api
 *   npm run orders-api -- --port 8080 --processing-ms 5000
 *   npm run orders-api -- --pg-url postgres://postgres@127.0.0.1:5432/postgres
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { argsOrExit, pglite } from "../Launch.js"
import * as Server from "./Server.js"

const usage = "usage: npm run orders-api -- [--port <port>] [--pg-url <postgres://…>] [--processing-ms <ms>]"

interface Args {
  readonly port: number
  readonly pgUrl: string | undefined
  readonly processing: Duration.Duration
}

const parse = (argv: ReadonlyArray<string>): Args => {
  let port = 3000
  let pgUrl = process.env.DATABASE_URL === "" ? undefined : process.env.DATABASE_URL
  let processing = Duration.seconds(2)
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    const value = argv[++i]
    switch (flag) {
      case "--port":
        port = Number(value)
        if (!Number.isInteger(port) || port < 0) throw new Error("--port needs a port number")
        break
      case "--pg-url":
        if (value === undefined || !value.startsWith("postgres")) throw new Error("--pg-url needs a postgres:// URL")
        pgUrl = value
        break
      case "--processing-ms":
        if (!(Number(value) >= 0)) throw new Error("--processing-ms needs a number of milliseconds")
        processing = Duration.millis(Number(value))
        break
      default:
        throw new Error(`unknown option ${flag}`)
    }
  }
  return { port, pgUrl, processing }
}

const args = argsOrExit(parse, usage)

Layer.unwrapScoped(Effect.gen(function*() {
  const pgUrl = args.pgUrl ?? (yield* pglite).url
  yield* Effect.logInfo(
    args.pgUrl === undefined ? "PostgreSQL: embedded PGlite (in memory)" : "PostgreSQL: the database of --pg-url"
  )
  yield* Effect.logInfo(`the API: http://127.0.0.1:${args.port}/orders, its documentation: /docs, /openapi.json`)
  return Server.layer({ pgUrl, port: args.port, processing: args.processing })
})).pipe(Layer.launch, NodeRuntime.runMain)
