//go:build !race

package pebblelog_test

// raceEnabled is set under -race (race_test.go).
const raceEnabled = false
