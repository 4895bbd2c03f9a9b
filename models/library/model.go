package library

// Sources of a model in the library.
const (
	SourceNPUChat    = "npuchat"    // installed by NPU Chat from its catalog
	SourceFastFlowLM = "fastflowlm" // registered in FastFlowLM's model_list.json
	SourceAdded      = "added"      // a file or folder the user added
	SourceRemote     = "remote"     // served by the remote server (the remote engine)
)

// Model is one installed model as the page and the tray list it.
type Model struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Format string `json:"format,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Path   string `json:"path,omitempty"`
	// Engines are what can run it: "npu", "cpu" or both ("remote" for
	// what the remote server serves).
	Engines []string `json:"engines"`
	// Loaded is true for the model the service has (loading or on);
	// State is then the service's state.
	Loaded bool   `json:"loaded"`
	State  string `json:"state,omitempty"`
	// Remove is what removing it does: "forget" (the entry only; the
	// files stay), "uninstall" (NPU Chat's own files), or "" when it
	// cannot be removed here (FastFlowLM's own models).
	Remove string `json:"remove,omitempty"`
	// Note says why something is missing (a file moved away, a model
	// the CPU cannot run).
	Note string `json:"note,omitempty"`
	// OFLM is where the model's oflm route stands, for the model oflm
	// can serve (MiniCPM5-2B); nil for the others.
	OFLM *OFLMOffer `json:"oflm,omitempty"`
}

// The states of an OFLMOffer.
const (
	// OFLMPrepared: the weights are prepared; oflm serves the model.
	OFLMPrepared = "prepared"
	// OFLMReady: oflm is installed and ready; the weights can be prepared.
	OFLMReady = "ready"
	// OFLMNotReady: oflm is installed but not ready (Note says why).
	OFLMNotReady = "not-ready"
	// OFLMPreparing: the weights are being prepared (Note says how
	// far, Frac is the fraction done).
	OFLMPreparing = "preparing"
	// OFLMMissing: oflm is not installed (Note says so, Link where to
	// get it; NPU Chat never downloads it).
	OFLMMissing = "missing"
)

// OFLMOffer is what the Models view says of a model's oflm route: its
// State (OFLMPrepared, ...), why not in Note, and oflm's install
// instructions in Link; Frac is how far a preparation is (0..1).
type OFLMOffer struct {
	State string  `json:"state"`
	Note  string  `json:"note,omitempty"`
	Link  string  `json:"link,omitempty"`
	Frac  float64 `json:"frac,omitempty"`
}

// Offer is one model the catalog offers, as the page lists it before
// any download: what can run it, and why the CPU cannot when it cannot.
type Offer struct {
	Name        string   `json:"name"`
	Source      string   `json:"source"` // SourceNPUChat or SourceFastFlowLM
	Description string   `json:"description,omitempty"`
	Size        int64    `json:"size,omitempty"`
	Engines     []string `json:"engines"`
	// CPUNote says why the in-process engine cannot run it ("" when
	// it can).
	CPUNote   string `json:"cpu_note,omitempty"`
	Installed bool   `json:"installed"`
	// Installable is true when the page's Install installs it.
	Installable bool `json:"installable"`
}
