/**
 * `npm start`: the verification of the retry scenario, end to end.
 *
 *   npm start                                    the report, on embedded PostgreSQL (PGlite)
 *   npm start -- --json                          one JSON object instead
 *   npm start -- --store memory                  the in-process memory store
 *   npm start -- --pg-url postgres://…           a PostgreSQL server
 *   npm start -- --dynamodb-endpoint http://127.0.0.1:8000   DynamoDB Local
 *   npm start -- --redis-url redis://127.0.0.1:6379         a Redis or Valkey server
 *   npm start -- --time-limit 3000 --retry-delays 500,1000
 *   npm start -- --via server                    the same work behind an HTTP server (IdempotencyMiddleware)
 *
 * Exits with 1 when a protected run does not end with exactly one downstream record and one
 * idempotency record, and with 2 when the scenario could not run.
 */
import { TimeLimit } from "@effect-idempotency/netlify"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import { argsOrExit } from "./Launch.js"
import * as Report from "./Report.js"
import * as Scenario from "./Scenario.js"
import * as Stores from "./Stores.js"

const usage = `usage: npm start -- [--json] [--store pglite|memory | --pg-url <url> | --dynamodb-endpoint <url>
                      | --redis-url <url>]
                      [--time-limit <ms>] [--retry-delays <ms>,<ms>] [--via function|server]`

interface Args {
  readonly json: boolean
  readonly via: Scenario.Via
  readonly store: Stores.Choice
  readonly settings: Scenario.Settings
}

const parseMillis = (flag: string, value: string | undefined): Duration.Duration => {
  const n = Number(value)
  if (value === undefined || !Number.isFinite(n) || n <= 0) throw new Error(`${flag} needs a positive number of ms`)
  return Duration.millis(n)
}

const parse = (argv: ReadonlyArray<string>): Args => {
  let json = false
  let via: Scenario.Via = "function"
  let store: Stores.Choice = { _tag: "PGlite" }
  let settings: Scenario.Settings = Scenario.defaults
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    switch (flag) {
      case "--json":
        json = true
        break
      case "--store": {
        const name = argv[++i]
        if (name === "memory") store = { _tag: "Memory" }
        else if (name === "pglite") store = { _tag: "PGlite" }
        else throw new Error(`unknown store ${name}: pglite or memory (or --pg-url, --dynamodb-endpoint, --redis-url)`)
        break
      }
      case "--pg-url": {
        const url = argv[++i]
        if (url === undefined || !url.startsWith("postgres")) throw new Error("--pg-url needs a postgres:// URL")
        store = { _tag: "Postgres", url }
        break
      }
      case "--dynamodb-endpoint": {
        const endpoint = argv[++i]
        if (endpoint === undefined || !endpoint.startsWith("http")) throw new Error("--dynamodb-endpoint needs a URL")
        store = { _tag: "DynamoDB", endpoint }
        break
      }
      case "--redis-url": {
        const url = argv[++i]
        if (url === undefined || !/^rediss?:\/\//.test(url)) throw new Error("--redis-url needs a redis:// URL")
        store = { _tag: "Redis", url }
        break
      }
      case "--time-limit": {
        const timeLimit = parseMillis(flag, argv[++i])
        settings = { ...settings, timeLimit, margin: TimeLimit.defaultMargin(timeLimit) }
        break
      }
      case "--via": {
        const value = argv[++i]
        if (value !== "function" && value !== "server") throw new Error("--via needs function or server")
        via = value
        break
      }
      case "--retry-delays":
        settings = { ...settings, retryDelays: (argv[++i] ?? "").split(",").map((v) => parseMillis(flag, v)) }
        break
      case "--help":
      case "-h":
        process.stdout.write(`${usage}\n`)
        process.exit(0)
        break
      default:
        throw new Error(`unknown option ${flag}`)
    }
  }
  return { json, via, store, settings }
}

const main = (args: Args) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* Stores.make(args.store)
    const report = yield* Scenario.run(store, args.settings, Scenario.specs, args.via)
    const failures = Scenario.failures(report)
    process.stdout.write(
      args.json ? `${JSON.stringify(Report.json(report, failures), null, 2)}\n` : Report.text(report, failures)
    )
    return failures.length === 0 ? 0 : 1
  })).pipe(
    // the runner's own log lines (store setup) go to stderr: stdout is the report
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger)))
  )

// the AWS SDK warns on Node 20 about its future versions; irrelevant to the report
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"

Effect.runPromiseExit(main(argsOrExit(parse, usage))).then((exit) => {
  if (Exit.isSuccess(exit)) {
    process.exitCode = exit.value
  } else {
    process.stderr.write(`the scenario could not run:\n${String(exit.cause)}\n`)
    process.exitCode = 2
  }
})
