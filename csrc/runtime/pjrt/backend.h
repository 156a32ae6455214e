// The PJRT backend: the runtime interface over a PJRT plugin -- libtpu on a TPU VM, the XLA CPU
// plugin anywhere, a GPU plugin where one is installed (README "PJRT backend").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace tpu::pjrt {

struct PjrtBackendOptions {
  std::string plugin;          // the plugin's path
  std::string client_options;  // "name=value,..." (ParseClientOptions)
  double init_timeout_s = 20;  // watchdog of plugin initialization and client creation
};

// Loads the plugin, initializes it and creates its client (under the watchdog). For libtpu it
// first sets TPU_SKIP_MDS_QUERY=1 and a private TPU_LOG_DIR (unless they are set), and on a
// machine without a TPU its errors say so; where the PCI devices can be listed and none is a TPU,
// libtpu is not loaded at all (a fast "no TPU found" error).
StatusOr<std::unique_ptr<Backend>> MakePjrtBackend(const PjrtBackendOptions& options);

// Whether `path` names libtpu (its file name starts with "libtpu").
bool IsLibtpu(const std::string& path);
// Whether this machine has a TPU: a PCI device of Google's vendor id 0x1ae0 under `pci_root`
// (/sys/bus/pci/devices).
bool TpuPresent(const std::string& pci_root = "/sys/bus/pci/devices");
// Whether `pci_root` lists at least one device (false in a container without /sys).
bool PciDevicesListable(const std::string& pci_root = "/sys/bus/pci/devices");

// Which plugin the pjrt backend loads: `option` (TORCH_TPU_PJRT_PLUGIN) when set; otherwise the
// first existing file of `candidates` (in order; the Python layer lists the installed plugins
// there), where libtpu counts only when `tpu_present`. An error says what was looked for.
StatusOr<std::string> ChoosePlugin(const std::string& option, const std::vector<std::string>& candidates,
                                   bool tpu_present);
// Splits a ':'-separated list (empty entries dropped).
std::vector<std::string> SplitPaths(const std::string& list);

}  // namespace tpu::pjrt
