/**
 * GPUs and links the estimator knows. Memory is what the driver reports as total (nvidia-smi / rocm-smi), in
 * MiB; compute is dense (no sparsity) bf16 from the vendor's datasheet; link bandwidth is per direction.
 */

export interface Link {
  id: string;
  name: string;
  /** Bandwidth per direction, GB/s (1e9 bytes). Marketing figures for NVLink add both directions. */
  perDirectionGBs: number;
}

export interface Gpu {
  id: string;
  name: string;
  /** Total memory as the driver reports it, MiB. */
  memoryMiB: number;
  /** Other names the driver or CUDA gives the same device (`torch.cuda.get_device_name`), which `--gpu` takes. */
  aliases?: string[];
  /** Dense bf16 tensor throughput, TFLOP/s (1e12). */
  bf16Tflops: number;
  /** Link between GPUs of one node. */
  intraNode: string;
  /** Typical per-GPU network between nodes for this class of system. */
  interNode: string;
}

export const LINKS: readonly Link[] = [
  // NVIDIA A100 datasheet: third-generation NVLink, 600 GB/s total (300 GB/s each way).
  { id: 'nvlink3', name: 'NVLink 3 (A100)', perDirectionGBs: 300 },
  // NVIDIA H100/H200 datasheets: fourth-generation NVLink, 900 GB/s total (450 GB/s each way).
  { id: 'nvlink4', name: 'NVLink 4 (H100/H200)', perDirectionGBs: 450 },
  // NVIDIA B200 (HGX B200) datasheet: fifth-generation NVLink, 1.8 TB/s total (900 GB/s each way).
  { id: 'nvlink5', name: 'NVLink 5 (B200)', perDirectionGBs: 900 },
  // PCI Express 4.0 x16: 16 GT/s x 16 lanes, 128b/130b encoding = 31.5 GB/s each way (64 GB/s "total").
  { id: 'pcie4-x16', name: 'PCIe Gen4 x16', perDirectionGBs: 31.5 },
  // PCI Express 5.0 x16: 32 GT/s x 16 lanes = 63 GB/s each way (128 GB/s "total").
  { id: 'pcie5-x16', name: 'PCIe Gen5 x16', perDirectionGBs: 63 },
  // AMD Instinct MI300X platform: 7 Infinity Fabric links per GPU at 64 GB/s each way (896 GB/s "aggregate" counts
  // both directions): 448 GB/s each way to the other seven GPUs.
  { id: 'infinity-fabric', name: 'AMD Infinity Fabric (MI300X platform)', perDirectionGBs: 448 },
  // AMD CDNA 4 white paper (MI350 series): 7 Infinity Fabric links per GPU at 76.8 GB/s in each direction
  // (153.6 GB/s "per link" counts both): 537.6 GB/s each way to the other seven GPUs.
  { id: 'infinity-fabric-4', name: 'AMD Infinity Fabric (MI350 platform)', perDirectionGBs: 537.6 },
  // InfiniBand HDR 200 Gb/s and NDR 400 Gb/s per GPU NIC: 25 and 50 GB/s each way.
  { id: 'ib-hdr', name: 'InfiniBand HDR 200 Gb/s per GPU', perDirectionGBs: 25 },
  { id: 'ib-ndr', name: 'InfiniBand NDR 400 Gb/s per GPU', perDirectionGBs: 50 },
  // Ethernet 100 and 400 Gb/s (RoCE), one NIC per GPU.
  { id: 'eth-100g', name: 'Ethernet 100 Gb/s per GPU', perDirectionGBs: 12.5 },
  { id: 'eth-400g', name: 'Ethernet 400 Gb/s per GPU', perDirectionGBs: 50 },
];

export const GPUS: readonly Gpu[] = [
  // H100 SXM5 80GB: nvidia-smi reports 81559 MiB; 989 TFLOP/s dense bf16 (1979 with sparsity).
  {
    id: 'h100-sxm-80gb',
    name: 'NVIDIA H100 SXM 80GB',
    memoryMiB: 81559,
    bf16Tflops: 989,
    intraNode: 'nvlink4',
    interNode: 'ib-ndr',
  },
  // H100 PCIe 80GB: 81559 MiB; 756 TFLOP/s dense bf16; GPUs of a node talk over PCIe Gen5 (NVLink bridges pair only two).
  {
    id: 'h100-pcie-80gb',
    name: 'NVIDIA H100 PCIe 80GB',
    memoryMiB: 81559,
    bf16Tflops: 756,
    intraNode: 'pcie5-x16',
    interNode: 'ib-ndr',
  },
  // H200 SXM 141GB: nvidia-smi reports 143771 MiB; same Hopper compute as H100 SXM (989 TFLOP/s dense bf16).
  {
    id: 'h200-141gb',
    name: 'NVIDIA H200 141GB',
    memoryMiB: 143771,
    bf16Tflops: 989,
    intraNode: 'nvlink4',
    interNode: 'ib-ndr',
  },
  // B200 (HGX B200): nvidia-smi reports 183359 MiB (seen in NVIDIA/TensorRT-LLM#10278); 2.25 PFLOP/s dense bf16
  // (the figure pytorch/ao's roofline utilities use).
  {
    id: 'b200-180gb',
    name: 'NVIDIA B200 180GB',
    memoryMiB: 183359,
    bf16Tflops: 2250,
    intraNode: 'nvlink5',
    interNode: 'ib-ndr',
  },
  // A100 SXM4 80GB: nvidia-smi reports 81920 MiB; 312 TFLOP/s dense bf16.
  {
    id: 'a100-sxm-80gb',
    name: 'NVIDIA A100 SXM 80GB',
    memoryMiB: 81920,
    bf16Tflops: 312,
    intraNode: 'nvlink3',
    interNode: 'ib-hdr',
  },
  // A100 SXM4 40GB: nvidia-smi reports 40960 MiB; 312 TFLOP/s dense bf16.
  {
    id: 'a100-sxm-40gb',
    name: 'NVIDIA A100 SXM 40GB',
    memoryMiB: 40960,
    bf16Tflops: 312,
    intraNode: 'nvlink3',
    interNode: 'ib-hdr',
  },
  // L40S 48GB: 46068 MiB; 362 TFLOP/s dense bf16; PCIe Gen4, no NVLink.
  {
    id: 'l40s-48gb',
    name: 'NVIDIA L40S',
    memoryMiB: 46068,
    bf16Tflops: 362,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
  // L4 24GB: 23034 MiB; 121 TFLOP/s dense bf16; PCIe Gen4.
  {
    id: 'l4-24gb',
    name: 'NVIDIA L4',
    memoryMiB: 23034,
    bf16Tflops: 121,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
  // GeForce RTX 4090 24GB: 24564 MiB; 165 TFLOP/s dense bf16 with fp32 accumulation; PCIe Gen4, no peer NVLink.
  {
    id: 'rtx4090-24gb',
    name: 'NVIDIA GeForce RTX 4090',
    memoryMiB: 24564,
    bf16Tflops: 165,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
  // H100 NVL 94GB: nvidia-smi reports 95830 MiB (thamada/nvidia-smi nvsim/H100NVLx2_smi.py); 835.5 TFLOP/s dense
  // bf16 (1,671 with sparsity); PCIe Gen5, NVLink bridges pair only two cards.
  {
    id: 'h100-nvl-94gb',
    name: 'NVIDIA H100 NVL',
    memoryMiB: 95830,
    bf16Tflops: 835.5,
    intraNode: 'pcie5-x16',
    interNode: 'ib-ndr',
  },
  // H20 96GB: nvidia-smi reports 97871 MiB (NVIDIA/nvtrust#128); 148 TFLOP/s dense bf16 (no NVIDIA datasheet is
  // public: the figure published with the card, which a measured bf16 GEMM at 142 TFLOP/s bears out); NVLink 4.
  {
    id: 'h20-96gb',
    name: 'NVIDIA H20',
    memoryMiB: 97871,
    bf16Tflops: 148,
    intraNode: 'nvlink4',
    interNode: 'ib-ndr',
  },
  // RTX A5000 24GB: nvidia-smi reports 24564 MiB with ECC off (akash-network/provider-configs#83); 111.1 TFLOP/s
  // dense bf16 (the datasheet's 222.2 is with sparsity); PCIe Gen4, NVLink bridges pair only two.
  {
    id: 'rtx-a5000-24gb',
    name: 'NVIDIA RTX A5000',
    memoryMiB: 24564,
    bf16Tflops: 111.1,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
  // GeForce RTX 3090 24GB: nvidia-smi reports 24576 MiB (noonghunna/club-3090#390); 71 TFLOP/s dense bf16 with fp32
  // accumulation (GA102); PCIe Gen4, an NVLink bridge pairs only two.
  {
    id: 'rtx3090-24gb',
    name: 'NVIDIA GeForce RTX 3090',
    memoryMiB: 24576,
    bf16Tflops: 71,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
  // GH200 with 96 GB of HBM3 (the driver names it "GH200 480GB", counting the Grace memory): nvidia-smi reports
  // 97871 MiB (hu-po/warp-ik docs/specs/arm-gh200.md); 989 TFLOP/s dense bf16, the H100 SXM's (NVIDIA's Grace
  // Hopper page, per chip without sparsity); NVLink 4 between superchips. Its GPU is the "H100 96GB HBM3" that
  // CUDA names on aarch64 hosts (Lambda's GH200 instances list "1x H100 96GB HBM3" with 72 Arm Neoverse cores;
  // NCSA DeltaAI's GH200 nodes report it so): the 96 GB H100 users name.
  {
    id: 'gh200-96gb',
    name: 'NVIDIA GH200 480GB',
    aliases: ['NVIDIA H100 96GB HBM3', 'h100-96gb'],
    memoryMiB: 97871,
    bf16Tflops: 989,
    intraNode: 'nvlink4',
    interNode: 'ib-ndr',
  },
  // B300 (HGX B300, "B300 SXM6 AC"): nvidia-smi reports 275040 MiB in public output (driver 580.95.05); 2.25
  // PFLOP/s dense bf16 (HGX B300 datasheet: 36 PFLOP/s sparse over 8 GPUs, halved; NVIDIA/cosmos-framework#114);
  // NVLink 5.
  {
    id: 'b300-288gb',
    name: 'NVIDIA B300 SXM6 AC',
    memoryMiB: 275040,
    bf16Tflops: 2250,
    intraNode: 'nvlink5',
    interNode: 'ib-ndr',
  },
  // RTX A6000 48GB: nvidia-smi reports 49140 MiB with ECC off, as it ships, in public output; 154.8 TFLOP/s dense
  // bf16 (GA102 whitepaper's RTX A6000 appendix; 309.7 with sparsity); PCIe Gen4, NVLink bridges pair only two.
  {
    id: 'rtx-a6000-48gb',
    name: 'NVIDIA RTX A6000',
    memoryMiB: 49140,
    bf16Tflops: 154.8,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
  // Instinct MI300X 192GB HBM3: rocm-smi reports 196592 MiB (206,141,652,992 bytes); 1307 TFLOP/s dense bf16.
  {
    id: 'mi300x-192gb',
    name: 'AMD Instinct MI300X',
    memoryMiB: 196592,
    bf16Tflops: 1307,
    intraNode: 'infinity-fabric',
    interNode: 'eth-400g',
  },
  // Instinct MI325X 256GB HBM3E: amd-smi reports 262128 MB (MiB: 256 GiB less 16 MiB, as the MI300X's 196592);
  // the MI300X's compute, 1307 TFLOP/s dense bf16; the MI300X platform's Infinity Fabric.
  {
    id: 'mi325x-256gb',
    name: 'AMD Instinct MI325X',
    memoryMiB: 262128,
    bf16Tflops: 1307,
    intraNode: 'infinity-fabric',
    interNode: 'eth-400g',
  },
  // Instinct MI355X 288GB HBM3E: rocm-smi reports 309,220,868,096 B (294896 MiB); 2.5 PFLOP/s dense bf16 as AMD
  // publishes it (5 with structured sparsity); CDNA 4's Infinity Fabric.
  {
    id: 'mi355x-288gb',
    name: 'AMD Instinct MI355X',
    memoryMiB: 294896,
    bf16Tflops: 2500,
    intraNode: 'infinity-fabric-4',
    interNode: 'eth-400g',
  },
  // L40 48GB (not the L40S): nvidia-smi reports 46068 MiB in public output; 181 TFLOP/s dense bf16 (NVIDIA's L40
  // table: 362.1 with sparsity); PCIe Gen4 x16, no NVLink.
  {
    id: 'l40-48gb',
    name: 'NVIDIA L40',
    memoryMiB: 46068,
    bf16Tflops: 181,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
  // A10G 24GB (AWS G5): nvidia-smi reports 23028 MiB (NVIDIA/DCGM#232). NVIDIA publishes no A10G datasheet: the
  // A10's 125 TFLOP/s dense bf16 is used (a measured bf16 GEMM on an A10G reached 69.5, so the compute times are
  // optimistic); PCIe, no NVLink (AWS G5 instances).
  {
    id: 'a10g-24gb',
    name: 'NVIDIA A10G',
    memoryMiB: 23028,
    bf16Tflops: 125,
    intraNode: 'pcie4-x16',
    interNode: 'eth-100g',
  },
];

export const DEFAULT_GPU = 'h100-sxm-80gb';

/** A GPU by id, or by a forgiving match on its name (`h100`, `H200`, `a100-80gb`). */
export function findGpu(id: string): Gpu | undefined {
  const exact = GPUS.find((g) => g.id === id);
  if (exact) return exact;
  const norm = id.toLowerCase().replace(/[^a-z0-9]/g, '');
  const plainName = (g: Gpu) => g.name.toLowerCase().replace(/[^a-z0-9]/g, '');
  const alias = GPUS.find((g) =>
    g.aliases?.some((a) => {
      const plain = a.toLowerCase().replace(/[^a-z0-9]/g, '');
      return plain === norm || plain.replace(/^(nvidia|amd)/, '') === norm;
    }),
  );
  if (alias) return alias;
  return (
    GPUS.find((g) => g.id.replace(/[^a-z0-9]/g, '') === norm) ??
    // The whole model name before a prefix of a longer one: `L4` is the L4, not the L40S.
    GPUS.find(
      (g) =>
        g.id.split('-')[0] === norm ||
        plainName(g) === norm ||
        plainName(g).replace(/^(nvidia|amd)/, '') === norm,
    ) ??
    // The model and its memory without the form factor: `a100-80gb` is the A100 SXM 80GB.
    GPUS.find((g) => {
      const parts = g.id.split('-');
      return parts.length > 2 && `${parts[0]}${parts[parts.length - 1]}` === norm;
    }) ??
    GPUS.find((g) => g.id.replace(/[^a-z0-9]/g, '').startsWith(norm)) ??
    GPUS.find((g) =>
      g.name
        .toLowerCase()
        .replace(/[^a-z0-9]/g, '')
        .includes(norm),
    )
  );
}

export function findLink(id: string): Link | undefined {
  return LINKS.find((l) => l.id === id);
}

/** Usable bytes of a GPU as the driver reports it. */
export function gpuBytes(g: Gpu): number {
  return g.memoryMiB * 1024 * 1024;
}

/** The GPU's name with its memory when the name does not say it (`NVIDIA L40S 48GB`), for lists to choose from. */
export function gpuLabel(g: Gpu): string {
  if (/\d\s*GB\b/.test(g.name)) return g.name;
  const gb = /(\d+)gb$/.exec(g.id)?.[1];
  return gb ? `${g.name} ${gb}GB` : g.name;
}
