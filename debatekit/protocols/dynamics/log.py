"""The per-debate documents of the debate-dynamics protocol, with the seed's (Portuguese) field names.

- `debate_log.json` (S3.7): session_id, timestamp_inicio/fim, query, participantes, rodadas
  (numero, tipo, duracao_ms, convergencia, agentes_responderam, agentes_timeout,
  mudancas_posicao), rag_queries (total, sucesso, timeout, chunks_citados), resultado
  (convergencia_final, confianca_sintese, escalado_para, circuit_breaker), metricas
  (tempo_total_ms, tokens_consumidos, rodadas_executadas); extra keys add what the seed's
  format has no place for (route, partial agents, void rounds, refused queries, invalid
  citations, council votes).
- `circuit_breaker.json` (S3.3): motivo, rodadas executadas "n de max", convergencia final,
  consensos, divergencias nao resolvidas, agentes em conflito, acao.
"""

from __future__ import annotations

from debatekit.protocols.dynamics.rules import Convergence


def rounds_done(rounds: list[dict]) -> int:
    """Rounds that produced positions (void attempts left out)."""
    return sum(1 for r in rounds if not r.get("vazia"))


def breaker_report(reason: str, rounds: list[dict], max_rounds: int, conv: Convergence,
                   divergences: list[str], target: str) -> dict:
    """The seed's circuit-breaker output."""
    return {"motivo": reason, "rodadas_executadas": f"{rounds_done(rounds)} de {max_rounds}",
            "convergencia_final": conv.score, "consensos_alcancados": conv.consensus,
            "divergencias_nao_resolvidas": divergences, "agentes_em_conflito": conv.conflicts,
            "acao": f"Escalando para {target}"}


def debate_log(*, session_id: str, started: str, finished: str, query: str, participants: list[str],
               route: str, rounds: list[dict], rag: dict, conv: Convergence, synthesis: dict | None,
               breaker: str | None, target: str, council: dict | None, elapsed_s: float, tokens: int) -> dict:
    """The seed's debate log (S3.7)."""
    recommendation = (council or {}).get("recommendation") or (synthesis or {}).get("recommendation")
    return {"debate_log": {
        "session_id": session_id, "timestamp_inicio": started, "timestamp_fim": finished, "query": query,
        "participantes": participants, "rota": route, "rodadas": rounds, "rag_queries": rag,
        "resultado": {"convergencia_final": conv.score,
                      "confianca_sintese": synthesis["confidence"] if synthesis else None,
                      "confianca_reduzida_por_timeout": bool(synthesis and synthesis["reduced_by_timeout"]),
                      "escalado_para": target, "circuit_breaker": breaker is not None,
                      "motivo_circuit_breaker": breaker, "recomendacao": recommendation, "council": council},
        "metricas": {"tempo_total_ms": round(elapsed_s * 1000), "tokens_consumidos": tokens,
                     "rodadas_executadas": rounds_done(rounds)}}}
