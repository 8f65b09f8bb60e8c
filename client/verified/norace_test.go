//go:build !race

package verified_test

// raceEnabled is set under -race (race_test.go).
const raceEnabled = false
