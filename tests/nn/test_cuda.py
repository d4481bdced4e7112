"""CUDA: the compute modes agree on the device, the device agrees with the CPU, checkpoints move to the CPU.

Skipped cleanly without a CUDA device.
"""

from __future__ import annotations

import copy

import pytest
import torch

from ssmts.nn import SSM, SSMBackbone, parameter_groups

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DEVICE = "cuda"
CONFIGS = [
    dict(heads=1),
    dict(heads=4, discretization="bilinear", real_bc=True),
    dict(heads=2, d_output=6, D="full", init="lin"),
    dict(heads=2, bidirectional="essm"),
    dict(heads=1, bidirectional="ldnn"),
]
IDS = ["heads1", "heads4-bilinear-realbc", "heads2-mimo-out", "essm", "ldnn"]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return float((a - b).abs().max() / b.abs().max())


def _layer(cfg: dict, dtype: torch.dtype, device: str) -> SSM:
    return SSM(4, 8, generator=torch.Generator().manual_seed(0), **cfg).to(device=device, dtype=dtype)


def _steps(layer: SSM, u: torch.Tensor) -> torch.Tensor:
    state = layer.initial_state(u.shape[0], device=u.device)
    ys = []
    for k in range(u.shape[-1]):
        y, state = layer.step(u[..., k], state)
        ys.append(y)
    return torch.stack(ys, dim=-1)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-8), (torch.float32, 1e-4)], ids=["f64", "f32"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_fft_equals_recurrence_equals_step_on_cuda(cfg, dtype, tol):
    """Oracle: the sequential recurrence (and step) on the same device."""
    layer = _layer(cfg, dtype, DEVICE)
    u = torch.randn(2, 4, 40, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(DEVICE, dtype)
    y = layer(u)
    assert y.device.type == "cuda" and y.dtype == dtype
    assert _rel(y, layer(u, mode="recurrence")) < tol
    if not layer.bidirectional:
        assert _rel(_steps(layer, u), y) < tol


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)], ids=["f64", "f32"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_cuda_matches_cpu_outputs_and_gradients(cfg, dtype, tol):
    """Oracle: the identical layer on the CPU (outputs and parameter gradients)."""
    cpu = _layer(cfg, dtype, "cpu")
    gpu = copy.deepcopy(cpu).to(DEVICE)
    u = torch.randn(2, 4, 300, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(dtype)
    y_cpu, y_gpu = cpu(u), gpu(u.to(DEVICE))
    assert _rel(y_gpu, y_cpu) < tol
    (y_cpu**2).mean().backward()
    (y_gpu**2).mean().backward()
    for (name, p_cpu), p_gpu in zip(cpu.named_parameters(), gpu.parameters()):
        assert _rel(p_gpu.grad, p_cpu.grad) < 10 * tol, name


def test_model_trained_on_cuda_loads_on_cpu(tmp_path):
    """A backbone trained one AdamW step on CUDA, saved with torch.save, loads with map_location='cpu' and
    gives the CUDA model's outputs (oracle: the CUDA model itself)."""
    torch.manual_seed(0)
    kwargs = dict(d_model=16, n_layers=2, d_output=3, d_state=8, heads=2, norm="batch")
    model = SSMBackbone(5, **kwargs).to(DEVICE)
    optimizer = torch.optim.AdamW(parameter_groups(model, lr=1e-2, lr_ssm=1e-3, weight_decay=0.01))
    u = torch.randn(4, 5, 64, device=DEVICE)
    target = torch.randint(0, 3, (4,), device=DEVICE)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.nn.functional.cross_entropy(model(u), target).backward()
    optimizer.step()
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())

    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp_path / "ckpt.pt")
    torch.save(model, tmp_path / "model.pt")
    checkpoint = torch.load(tmp_path / "ckpt.pt", map_location="cpu")
    assert all(v.device.type == "cpu" for v in checkpoint["model"].values())
    cpu_model = SSMBackbone(5, **kwargs)
    cpu_model.load_state_dict(checkpoint["model"])
    whole = torch.load(tmp_path / "model.pt", map_location="cpu", weights_only=False)
    assert all(p.device.type == "cpu" for p in whole.parameters())

    model.eval(), cpu_model.eval(), whole.eval()
    with torch.no_grad():
        expected = model(u)
        assert _rel(cpu_model(u.cpu()), expected) < 1e-4
        assert _rel(whole(u.cpu()), expected) < 1e-4
    # The optimizer state moves too: one more step on the CPU works.
    cpu_optimizer = torch.optim.AdamW(parameter_groups(cpu_model, lr=1e-2, lr_ssm=1e-3, weight_decay=0.01))
    cpu_optimizer.load_state_dict(checkpoint["optimizer"])
    cpu_model.train()
    torch.nn.functional.cross_entropy(cpu_model(u.cpu()), target.cpu()).backward()
    cpu_optimizer.step()
