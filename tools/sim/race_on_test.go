//go:build race

package sim_test

// raceEnabled: the race detector makes a schedule several times slower.
const raceEnabled = true
