import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "dynamodb",
      // DynamoDB Local and dynalite, started once for every test file of this package
      globalSetup: ["./test/globalSetup.ts"]
    }
  })
)
