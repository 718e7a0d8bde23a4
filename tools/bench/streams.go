package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Where the Kafka Streams side lives in this repository, relative to its
// root (see bench/streams/README.md).
const (
	streamsPOM = "bench/streams/pom.xml"
	streamsJar = "bench/streams/target/streams-bench.jar"
)

// streamsApp is a runnable Kafka Streams benchmark app.
type streamsApp struct {
	java string
	jar  string
}

// findStreams returns the Java app, building the jar with Maven when only
// its sources are there. A non-nil error wrapping errSkipped says why the
// case cannot run here.
func findStreams(ctx context.Context, o *Options) (*streamsApp, error) {
	java := o.Java
	if java == "" {
		java = "java"
	}
	javaPath, err := exec.LookPath(java)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not on PATH; install Java 17 to compare with Kafka Streams", errSkipped, java)
	}
	if o.Base != nil && (o.Base.TLS.Enabled || o.Base.SASL.Mechanism != "") {
		return nil, fmt.Errorf("%w: the Kafka Streams app connects without TLS or SASL", errSkipped)
	}
	jar := o.StreamsJar
	if jar != "" {
		if _, err := os.Stat(jar); err != nil {
			return nil, fmt.Errorf("%w: --streams-jar %s: %v", errSkipped, jar, err)
		}
		return &streamsApp{java: javaPath, jar: jar}, nil
	}
	root, ok := repoRoot()
	if !ok {
		return nil, fmt.Errorf("%w: no %s found from the working directory up; run from the eosflow repository or pass --streams-jar", errSkipped, streamsPOM)
	}
	jar = filepath.Join(root, streamsJar)
	if _, err := os.Stat(jar); err == nil {
		return &streamsApp{java: javaPath, jar: jar}, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not built and mvn is not on PATH; build it with `mvn -q -f %s package -DskipTests`", errSkipped, streamsJar, streamsPOM)
	}
	progressf(o.Progress, "building the Kafka Streams app with Maven (once; takes a minute or two)")
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, mvn, "-q", "-f", filepath.Join(root, streamsPOM), "package", "-DskipTests")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: building %s failed: %v: %s", errSkipped, streamsJar, err, lastLines(string(out), 5))
	}
	if _, err := os.Stat(jar); err != nil {
		return nil, fmt.Errorf("%w: Maven finished but %s is missing", errSkipped, jar)
	}
	return &streamsApp{java: javaPath, jar: jar}, nil
}

// argv is the command line running the app on one case's topics.
func (a *streamsApp) argv(brokers []string, in, out, appID, guarantee string, commit time.Duration) []string {
	return []string{a.java, "-jar", a.jar,
		"--bootstrap", strings.Join(brokers, ","),
		"--input", in, "--output", out, "--app-id", appID,
		"--guarantee", guarantee,
		"--commit-interval-ms", strconv.FormatInt(commit.Milliseconds(), 10),
	}
}

// repoRoot walks up from the working directory to the directory holding
// the Kafka Streams app's pom.xml.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, streamsPOM)); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func progressf(w io.Writer, format string, a ...any) {
	if w != nil {
		fmt.Fprintf(w, "bench: "+format+"\n", a...)
	}
}
