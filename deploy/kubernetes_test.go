package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/tools/conformance"
)

const statefulSetFile = "kubernetes/statefulset.yaml"

// k8sObject is the part of a Service or StatefulSet the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		ServiceName string `yaml:"serviceName"`
		Ports       []struct {
			Name string `yaml:"name"`
			Port int    `yaml:"port"`
		} `yaml:"ports"`
		Template struct {
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Env []struct {
						Name      string `yaml:"name"`
						Value     string `yaml:"value"`
						ValueFrom *struct {
							FieldRef *struct {
								FieldPath string `yaml:"fieldPath"`
							} `yaml:"fieldRef"`
							SecretKeyRef *struct {
								Name string `yaml:"name"`
							} `yaml:"secretKeyRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					LivenessProbe  probe `yaml:"livenessProbe"`
					ReadinessProbe probe `yaml:"readinessProbe"`
					VolumeMounts   []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

// probe is an HTTP probe of a container.
type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// The StatefulSet in deploy/kubernetes configures a pipeline the way
// docs/operating.md says: its environment loads (config.FromEnv) into a valid config
// whose instance_id is the pod's name, so the transactional id is stable
// per pod (and per worker, <pod>-i, under workers); its probes hit paths Runner.Handler serves, on the port
// metrics_addr listens on; a stopping pod has longer than
// transaction_timeout to commit; and state_dir is on the pod's volume.
func TestStatefulSetConfiguresAPipeline(t *testing.T) {
	raw, err := os.ReadFile(statefulSetFile)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]k8sObject{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", statefulSetFile, err)
		}
		objs[o.Kind] = o
	}
	sts, svc := objs["StatefulSet"], objs["Service"]
	if sts.Metadata.Name == "" || svc.Metadata.Name == "" || sts.Spec.ServiceName != svc.Metadata.Name {
		t.Fatalf("want a StatefulSet whose serviceName is the Service's name; got %q and %q", sts.Spec.ServiceName, svc.Metadata.Name)
	}
	if len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(sts.Spec.Template.Spec.Containers))
	}
	c := sts.Spec.Template.Spec.Containers[0]

	// The pod orders-1 as Kubernetes would start it.
	pod := sts.Metadata.Name + "-1"
	set := map[string]string{}
	for _, e := range c.Env {
		switch {
		case !strings.HasPrefix(e.Name, "EOS_"):
			t.Fatalf("env %s: not an eosflow setting", e.Name)
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			if e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Fatalf("env %s from %s, want metadata.name", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			set[e.Name] = pod
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			if e.Name != "EOS_SASL_PASSWORD" {
				t.Fatalf("env %s from a secret: only the password is secret", e.Name)
			}
		default:
			set[e.Name] = e.Value
		}
	}
	for _, k := range os.Environ() {
		if name, _, _ := strings.Cut(k, "="); strings.HasPrefix(name, "EOS_") {
			t.Setenv(name, "") // empty counts as unset
		}
	}
	for k, v := range set {
		t.Setenv(k, v)
	}
	cfg, err := config.FromEnv(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the manifest's environment is not a valid config: %v", err)
	}
	// Every variable the manifest sets took effect: a misspelt name would
	// leave its setting at the default.
	applied := map[string]bool{
		"EOS_INSTANCE_ID":         cfg.InstanceID == pod,
		"EOS_APP_ID":              cfg.AppID == set["EOS_APP_ID"] && cfg.AppID != "",
		"EOS_BROKERS":             strings.Join(cfg.Brokers, ",") == set["EOS_BROKERS"],
		"EOS_GUARANTEE":           string(cfg.Guarantee) == set["EOS_GUARANTEE"],
		"EOS_TRANSACTION_TIMEOUT": cfg.TransactionTimeout.String() == set["EOS_TRANSACTION_TIMEOUT"],
		"EOS_SESSION_TIMEOUT":     cfg.SessionTimeout.String() == set["EOS_SESSION_TIMEOUT"],
		"EOS_METRICS_ADDR":        cfg.MetricsAddr == set["EOS_METRICS_ADDR"],
		"EOS_STATE_DIR":           cfg.StateDir == set["EOS_STATE_DIR"],
		"EOS_LOG_LEVEL":           cfg.LogLevel == set["EOS_LOG_LEVEL"],
		"EOS_WORKERS":             cfg.Workers.String() == set["EOS_WORKERS"],
		"EOS_GROUP_PROTOCOL":      string(cfg.GroupProtocol) == set["EOS_GROUP_PROTOCOL"],
	}
	for k := range set {
		if ok, known := applied[k]; !known || !ok {
			t.Fatalf("%s=%q did not reach the config (known to this test: %v)", k, set[k], known)
		}
	}
	if want := cfg.AppID + ":" + pod; runcfg.TransactionalID(cfg) != want {
		t.Fatalf("transactional id %q, want %q: stable per pod", runcfg.TransactionalID(cfg), want)
	}
	// Each worker's ids come from the pod name too.
	if n := runcfg.WorkerCount(cfg); n > 1 {
		if w := runcfg.ForWorker(cfg, n-1); w.InstanceID != pod+"_"+strconv.Itoa(n-1) || runcfg.TransactionalID(w) != cfg.AppID+":"+w.InstanceID {
			t.Fatalf("worker %d: instance %q, transactional id %q; want them from the pod name", n-1, w.InstanceID, runcfg.TransactionalID(w))
		}
	}

	// Probes and ports.
	_, port, _ := strings.Cut(cfg.MetricsAddr, ":")
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, probe := range []string{c.LivenessProbe.HTTPGet.Port, c.ReadinessProbe.HTTPGet.Port} {
		if strconv.Itoa(ports[probe]) != port {
			t.Fatalf("a probe uses port %q (%d), but metrics_addr listens on %s", probe, ports[probe], port)
		}
	}
	if len(svc.Spec.Ports) != 1 || strconv.Itoa(svc.Spec.Ports[0].Port) != port {
		t.Fatalf("the Service's ports %v, want metrics_addr's %s", svc.Spec.Ports, port)
	}
	cfg.MetricsAddr = "" // not served here: the handler is enough
	r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	h := r.Handler()
	for path, want := range map[string]int{c.LivenessProbe.HTTPGet.Path: http.StatusOK, c.ReadinessProbe.HTTPGet.Path: http.StatusServiceUnavailable} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Fatalf("probe %s answers %d before Run, want %d", path, rec.Code, want)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Fatalf("liveness %s, readiness %s: want /healthz and /readyz", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}

	// Shutdown and state.
	if grace := time.Duration(sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; grace <= cfg.TransactionTimeout+cfg.CommitInterval {
		t.Fatalf("terminationGracePeriodSeconds %s: a stopping pod needs longer than transaction_timeout %s to commit its open batch", grace, cfg.TransactionTimeout)
	}
	mounted := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounted[m.MountPath] = m.Name
	}
	vol, ok := mounted[cfg.StateDir]
	if !ok || len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Metadata.Name != vol {
		t.Fatalf("state_dir %s is not on the pod's volume claim (mounts %v)", cfg.StateDir, mounted)
	}
}
