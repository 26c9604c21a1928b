"""call log: calls, turns, call events

Revision ID: 0001
Revises: 
Create Date: 2026-11-22

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('calls',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('sip_call_id', sa.String(length=255), nullable=False),
    sa.Column('caller', sa.String(length=255), nullable=False),
    sa.Column('callee', sa.String(length=255), nullable=False),
    sa.Column('node', sa.String(length=255), nullable=False),
    sa.Column('config_version', sa.String(length=64), nullable=False),
    sa.Column('arrived_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('answered_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('end_reason', sa.String(length=64), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_calls'))
    )
    with op.batch_alter_table('calls', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_calls_answered_at'), ['answered_at'], unique=False)
        batch_op.create_index('ix_calls_node_open', ['node', 'ended_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_calls_sip_call_id'), ['sip_call_id'], unique=False)

    op.create_table('call_events',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('call_id', sa.Uuid(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('detail', sa.Text(), nullable=True),
    sa.Column('purged_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['call_id'], ['calls.id'], name=op.f('fk_call_events_call_id_calls'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_call_events'))
    )
    with op.batch_alter_table('call_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_call_events_call_id'), ['call_id'], unique=False)

    op.create_table('turns',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('call_id', sa.Uuid(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('transcript', sa.Text(), nullable=True),
    sa.Column('answer', sa.Text(), nullable=True),
    sa.Column('route', sa.String(length=32), nullable=False),
    sa.Column('intent', sa.String(length=128), nullable=True),
    sa.Column('intent_score', sa.Float(), nullable=True),
    sa.Column('barged_in', sa.Boolean(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('speech_end_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('eot_decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('transcript_ready_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('route_decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('first_token_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('first_audio_out_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('response_done_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('model_ms', sa.JSON(), nullable=False),
    sa.Column('purged_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['call_id'], ['calls.id'], name=op.f('fk_turns_call_id_calls'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_turns')),
    sa.UniqueConstraint('call_id', 'seq', name='uq_turns_call_id_seq')
    )
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_turns_call_id'), ['call_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_turns_finished_at'), ['finished_at'], unique=False)



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('turns', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_turns_finished_at'))
        batch_op.drop_index(batch_op.f('ix_turns_call_id'))

    op.drop_table('turns')
    with op.batch_alter_table('call_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_call_events_call_id'))

    op.drop_table('call_events')
    with op.batch_alter_table('calls', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_calls_sip_call_id'))
        batch_op.drop_index('ix_calls_node_open')
        batch_op.drop_index(batch_op.f('ix_calls_answered_at'))

    op.drop_table('calls')
